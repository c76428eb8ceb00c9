package zkbridge

import (
	"math"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Which ephemeral nodes count as a Flink JobManager's, per layout
// family, including places the emulator does not write (1.4's leader
// node itself and latch nodes directly under leaderlatch, the legacy
// JobManager's <00..0>/job_manager_lock, empty leader information).
func TestFlinkEphemeral(t *testing.T) {
	info, err := flinkha.EncodeLeaderInfo(flinkha.LeaderInfo{Address: "pekko.tcp://flink@10.0.0.1:6123/user/rpc/dispatcher_1", SessionID: "4f1e2a4b-1c2d-4e5f-8a9b-0a1b2c3d4e5f"})
	if err != nil {
		t.Fatal(err)
	}
	const (
		ns    = "/flink/c"
		job   = "3f1b2c4d5e6f7a8b9c0d1f1234567890"
		uuid  = "c8088464-4aee-48ae-a022-1d70e2ad512d"
		latch = "_c_3612ca40-b41a-490a-adc2-2fc4ac1faade-latch-0000000000"
	)
	session := SessionID(0x100001500220004)
	highServer := SessionID(-0x7f00000000000001) // myid 128+: top bit set, still a session
	for _, tc := range []struct {
		path  string
		kind  EphemeralKind // a lock's kind as lockChildren sets it; "" for the walks
		owner SessionID
		data  []byte
		want  EphemeralKind // "" foreign
	}{
		// 1.4 (legacy JobManager): latch nodes directly under
		// leaderlatch, the leader node itself; or, with the HA
		// services, <00..0>/job_manager_lock.
		{ns + "/leaderlatch/" + latch, "", session, nil, KindLatch},
		{ns + "/leader", "", session, info, KindLeader},
		{ns + "/leaderlatch/00000000000000000000000000000000/job_manager_lock/" + latch, "", session, nil, KindLatch},
		{ns + "/leader/00000000000000000000000000000000/job_manager_lock", "", session, info, KindLeader},
		// 1.5-1.13.
		{ns + "/leaderlatch/dispatcher_lock/" + latch, "", session, nil, KindLatch},
		{ns + "/leader/dispatcher_lock", "", session, info, KindLeader},
		{ns + "/leader/" + job + "/job_manager_lock", "", session, info, KindLeader},
		{ns + "/checkpoints/" + job + "/0000000000000000003/" + uuid, KindCheckpointLock, session, nil, KindCheckpointLock},
		{ns + "/jobgraphs/" + job + "/" + uuid, KindJobGraphLock, session, nil, KindJobGraphLock},
		// 1.14.
		{ns + "/leader/resource_manager/latch/" + latch, "", session, nil, KindLatch},
		{ns + "/leader/resource_manager/connection_info", "", session, info, KindLeader},
		{ns + "/jobs/" + job + "/leader/latch/" + latch, "", session, nil, KindLatch},
		{ns + "/jobs/" + job + "/leader/connection_info", "", session, info, KindLeader},
		{ns + "/jobs/" + job + "/checkpoints/0000000000000000003/" + uuid, KindCheckpointLock, session, nil, KindCheckpointLock},
		// 1.15+ (1.18+ and 2.x: job-<job>), empty leader information too.
		{ns + "/leader/latch/" + latch, "", highServer, nil, KindLatch},
		{ns + "/leader/" + job + "/connection_info", "", session, info, KindLeader},
		{ns + "/leader/job-" + job + "/connection_info", "", session, nil, KindLeader},
		{ns + "/jobs/" + job + "/checkpoints/0000000000000000003/locks/" + uuid, KindCheckpointLock, session, nil, KindCheckpointLock},
		{ns + "/execution-plans/" + job + "/locks/" + uuid, KindJobGraphLock, session, nil, KindJobGraphLock},
		// A sequence number that wrapped.
		{ns + "/leader/latch/_c_3612ca40-b41a-490a-adc2-2fc4ac1faade-latch--000000005", "", session, nil, KindLatch},

		// Foreign: names Flink never writes there, data that is not
		// leader information, owners that are no session.
		{ns + "/leader/squat", "", session, nil, ""},
		{ns + "/leader/latch/squat", "", session, nil, ""},
		{ns + "/leader/dispatcher/connection_info", "", session, []byte("127.0.0.1"), ""},
		{ns + "/leader/rest_server_lock", "", session, []byte{0xac, 0xed, 0, 5, 1}, ""},
		{ns + "/leaderlatch/dispatcher_lock", "", session, info, ""},
		{ns + "/leaderlatch/squat", "", session, nil, ""},
		{ns + "/jobs/" + job + "/leader", "", session, nil, ""},
		{ns + "/leader/latch/_c_3612ca40-b41a-490a-adc2-2fc4ac1faade-latch-00000000x0", "", session, nil, ""},
		{ns + "/leader/latch/_c_3612ca40b41a490aadc22fc4ac1faade-latch-0000000000", "", session, nil, ""},
		{ns + "/jobs/" + job + "/checkpoints/0000000000000000003/locks/squat", KindCheckpointLock, session, nil, ""},
		{ns + "/jobs/" + job + "/checkpoints/0000000000000000003/locks", KindCheckpointLock, session, nil, ""},
		{ns + "/jobgraphs/" + job + "/recovery-lock", KindJobGraphLock, session, nil, ""},
		{ns + "/leader/latch/" + latch, "", SessionID(math.MinInt64), nil, ""},
		{ns + "/leader/latch/" + latch, "", SessionID(-1<<56 | 1000), nil, ""},
	} {
		n := EphemeralNode{Path: tc.path, Kind: tc.kind, Owner: tc.owner}
		why := flinkEphemeral(ns, &n, tc.data)
		switch {
		case tc.want == "" && why == "":
			t.Errorf("%s (owner %s, data %q): counts as %s, want foreign", tc.path, tc.owner, tc.data, n.Kind)
		case tc.want != "" && why != "":
			t.Errorf("%s (owner %s): foreign (%s), want %s", tc.path, tc.owner, why, tc.want)
		case tc.want != "" && n.Kind != tc.want:
			t.Errorf("%s: kind %s, want %s", tc.path, n.Kind, tc.want)
		case tc.want == KindLeader && len(tc.data) > 0 && n.Address == "":
			t.Errorf("%s: no address decoded", tc.path)
		}
	}
}
