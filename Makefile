# ckptfs build and test contract. `make demo` and `make test` set up
# everything they need on a fresh Debian machine (run as root).

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)

# Fuzz targets: package:FuncName:executions. `make test` runs each for
# that many executions (10 to 30 s each here, 3 minutes in all), `make
# fuzz` for FUZZTIME.
# make test counts executions rather than seconds: Go 1.26's fuzzing
# coordinator can fail a run that hits its -fuzztime deadline with a bare
# "context deadline exceeded" and no failing input (go.dev/issue/75804,
# fixed in Go 1.27); a count has no deadline.
FUZZ_TARGETS := ./manifest/metadata:FuzzDecode:60000 ./manifest/javaser:FuzzDecode:300000 \
	./manifest/flinkha:FuzzDecodeCompletedCheckpoint:100000 ./manifest/flinkha:FuzzDecodeStateHandle:200000 \
	./manifest/flinkha:FuzzDecodeLeaderInfo:250000 ./manifest/flinkha:FuzzPathToURI:250000 \
	./manifest/flinkha:FuzzDecodeJobGraph:40000 ./manifest/flinkha:FuzzDecodeJobResult:60000 \
	./flinkconf:FuzzParse:150000 ./flinkconf:FuzzParseMap:300000 \
	./internal/zksasl:FuzzExchange:150000 ./internal/zksasl:FuzzDigestResponse:250000 \
	./manifest:FuzzChangelogChanges:150000
FUZZTIME ?= 10m

.PHONY: all build deps flink chaos-flink chaos-eo bench-sync chaos-net jepsen guard-flink bench-wan bench-scale bench-zk-scale harvest corpus corpus-restore corpus-all corpus-walk test unit vet bench bench-flink fuzz chaos demo dr-rehearsal check-alerts alerts-e2e install deb release systemd-e2e clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ckptfs ./cmd/ckptfs

# Debian packages the tests use: ZooKeeper 3.8 (with its JRE), a JDK for
# the Java serialization proofs and the real-Flink job, systemd for
# systemd-analyze verify of the units in deploy/systemd, unzip for Flink's
# packages, nsenter for the sites' namespaces, Prometheus (Debian's
# prometheus package: the server, and promtool for the alert rules' unit
# tests) and its node exporter for the alerts proven in a real
# Prometheus, debootstrap and systemd-nspawn (systemd-container) for the
# machines that prove the package and the units under a real systemd.
deps:
	@need=""; \
	[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need="$$need zookeeper"; \
	command -v javac >/dev/null 2>&1 || need="$$need openjdk-17-jdk-headless"; \
	command -v systemd-analyze >/dev/null 2>&1 || need="$$need systemd"; \
	command -v unzip >/dev/null 2>&1 || need="$$need unzip"; \
	command -v nsenter >/dev/null 2>&1 || need="$$need util-linux"; \
	command -v pip >/dev/null 2>&1 || need="$$need python3-pip"; \
	command -v promtool >/dev/null 2>&1 || need="$$need prometheus"; \
	command -v prometheus-node-exporter >/dev/null 2>&1 || need="$$need prometheus-node-exporter"; \
	command -v debootstrap >/dev/null 2>&1 || need="$$need debootstrap"; \
	command -v systemd-nspawn >/dev/null 2>&1 || need="$$need systemd-container"; \
	if [ -n "$$need" ]; then \
		echo "installing:$$need"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; \
	fi

# The Flink distributions make test runs (flink/versions.tsv, use "test",
# "cold" or "tried"), downloaded once into $(CKPTFS_CACHE)/flink and checked
# against their sha256. FLINK_VERSIONS= names others from the table.
CKPTFS_CACHE ?= /var/cache/ckptfs
export CKPTFS_CACHE
FLINK_VERSIONS ?=
flink: deps
	@bash flink/fetch.sh $(FLINK_VERSIONS) >/dev/null

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# Everything, including the tests that need ZooKeeper, a JDK, FUSE and
# systemd-analyze: here they fail instead of skipping when what they need
# is missing.
# The real-Flink tests run after the others, alone: four JVMs of Flink on
# two cores would slow the timing-sensitive mount and ZooKeeper tests.
REQUIRE := CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_JDK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_SYSTEMD=1 CKPTFS_REQUIRE_FLINK=1 CKPTFS_REQUIRE_PROMETHEUS=1
test: deps flink vet build
	CKPTFS_SCALE_SHORT=1 $(REQUIRE) $(GO) test -race -count=1 -timeout 18m $$($(GO) list ./... | grep -v /integration/realflink)
	$(REQUIRE) $(GO) test -race -count=1 -timeout 20m ./integration/realflink/
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$${rest#*:}; \
		echo "fuzz $$pkg $$fn ($${n} executions)"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$${n}x -fuzzminimizetime=5s $$pkg || exit 1; \
	done

# The fast tests, about 35 s on two idle cores (65 s of CPU, a third of
# it TestTruncatedRealFilesFail, which decodes prefixes of real _metadata
# files, every prefix of some): go test -short, in which the
# helpers that would start ZooKeeper, FUSE mounts, a JDK, Flink or
# systemd-analyze skip those tests; testreport lists them at the end.
# Needs neither root nor make deps; no race detector (make test has it).
# The two slowest packages come first so that the others run beside them.
unit:
	@bash -o pipefail -c '$(GO) test -short -count=1 -json ./manifest/metadata ./manifest ./... | $(GO) run ./internal/testreport'

# Benchmarks report ratios against a baseline measured in the same run
# (bare stat, direct file system). The mount benchmarks need root and drop
# the page cache; CKPTFS_BENCH_SIZE sizes their large file (default 1 GiB).
# They run every case 3 times and compare the best runs, which the other
# work on a shared machine disturbs least.
bench: deps build
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./manifest/...
	CKPTFS_REQUIRE_ZK=1 $(GO) test -run='^$$' -bench=. -count=1 ./zkbridge/
	CKPTFS_REQUIRE_FUSE=1 $(GO) test -run='^$$' -bench=. -benchtime=3x -count=1 -timeout 45m ./fusefs/
	@bash -o pipefail -c "CKPTFS_REQUIRE_FUSE=1 $(GO) test -run='^$$' -bench=CheckpointWrites -benchtime=1x -count=1 -v ./cmd/ckptfs/ | grep -v 'ckptfs: '"

# ckptfs over a slow WAN: ZooKeeper's servers placed 2+2+1 on sites that
# are network hosts with 0 (the baseline), 10, 20 and 40 ms between
# them; the takeover of 20 jobs run in DC2 and the latency of DC2's
# markers.
bench-wan: deps build
	CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 nice -n 19 $(GO) test -run='^$$' -bench='^BenchmarkIntegration_WAN$$' -benchtime=5x -count=1 -timeout 30m ./integration/realflink/

# ckptfs at a platform's scale (issue 32, integration/scale): JOBS jobs ×
# 3 retained RocksDB-incremental checkpoints of FILES files each (real
# _metadata made from the corpus; the layout is cached in
# $(CKPTFS_CACHE)/scale), served by faultfs with DELAY added to every NAS
# operation, under a real `ckptfs mount --mode replica` (poll 2 s) while
# a writer adds a checkpoint per job every INTERVAL and subsumes the
# oldest. Reports start to mounted, CPU, RSS, pass time, visibility
# latency of new checkpoints and of a deleted or truncated file, NAS
# operations a pass and the floor (docs/design.md §4.5.1). DURATION is
# the steady window; DELAY=local runs the daemon on the local disk, without
# faultfs (no operations counted). AUDIT is the daemon's --audit-period
# (empty: its default, 10m), which bounds how soon a truncated file hides
# its checkpoint; TRUNCATE=0 skips that measure. The acceptance layout is JOBS=500 FILES=2000 DELAY=1ms
# (about 1.2M files; made once in a few minutes).
JOBS     ?= 50
FILES    ?= 2000
DELAY    ?= 0
DURATION ?= 1m
INTERVAL ?= 10s
AUDIT    ?=
TRUNCATE ?=
bench-scale: build
	@bash -o pipefail -c "CKPTFS_REQUIRE_FUSE=1 CKPTFS_SCALE_JOBS=$(JOBS) CKPTFS_SCALE_FILES=$(FILES) CKPTFS_SCALE_DELAY=$(DELAY) \
		CKPTFS_SCALE_DURATION=$(DURATION) CKPTFS_SCALE_INTERVAL=$(INTERVAL) CKPTFS_SCALE_AUDIT=$(AUDIT) CKPTFS_SCALE_TRUNCATE=$(TRUNCATE) \
		$(GO) test -run='^$$' -bench='^BenchmarkScale$$' -benchtime=1x -count=1 -v -timeout 180m ./integration/scale/"

# ZooKeeper at a platform's scale (issue 32): a three-server ensemble,
# one server per site, with 10 and 40 ms each way between sites;
# `ckptfs status`, the manual and automatic takeover and the markers of
# ZK_JOBS jobs of three pointers, one sweeper pass, then ZK_DAEMONS
# daemons of one site renewing the lease and publishing every job's
# marker for ZK_RUN, their request rate and the ensemble's ceiling. About
# 15 minutes with the defaults. make test runs its short form
# (zkbridge's TestIntegration_Scale).
ZK_JOBS ?= 500
ZK_DAEMONS ?= 500
ZK_RUN ?= 3m
bench-zk-scale: deps
	CKPTFS_REQUIRE_ZK=1 CKPTFS_ZK_SCALE=1 CKPTFS_ZK_SCALE_JOBS=$(ZK_JOBS) CKPTFS_ZK_SCALE_DAEMONS=$(ZK_DAEMONS) CKPTFS_ZK_SCALE_RUN=$(ZK_RUN) \
		$(GO) test -run='^$$' -bench='^BenchmarkIntegration_ZKScale$$' -benchtime=1x -count=1 -timeout 60m ./zkbridge/

# What ckptfs costs real Flink, as ratios within one run (mount against
# the backing directory, replica mount against the plain replica): Flink's
# checkpoint durations through DC1's primary mount, the restore on DC2,
# and the recovery's breakdown. BENCH_RUNS runs per case, alternated ABBA;
# BENCH_FLINK picks the release (default: the newest 1.20.x). About 25
# minutes with the defaults.
BENCH_RUNS ?= 4
BENCH_FLINK ?=
bench-flink: deps flink build
	@bash -o pipefail -c "CKPTFS_BENCH_RUNS=$(BENCH_RUNS) CKPTFS_BENCH_FLINK=$(BENCH_FLINK) \
		CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_FLINK=1 \
		$(GO) test -v -count=1 -run '^$$' -bench 'CheckpointDuration|RestoreDuration|RecoveryBreakdown|HotStandbyRTO' -benchtime=1x -timeout 120m \
		./integration/realflink/ | grep -v -e 'logging.go:[0-9]*: zk[0-9]|'"

# What RPO 0 costs (issue 33): checkpoints of the job with its
# exactly-once sinks on real Flink, DC1's mount in sync mode against
# async, ABBA (BENCH_RUNS per mode): durations, the replication's latency
# for one checkpoint, the floor, failed checkpoints, throughput.
bench-sync: deps flink build
	@bash -o pipefail -c "CKPTFS_BENCH_RUNS=$(BENCH_RUNS) CKPTFS_BENCH_FLINK=$(BENCH_FLINK) \
		CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_FLINK=1 \
		$(GO) test -v -count=1 -run '^$$' -bench 'SyncCheckpoint' -benchtime=1x -timeout 120m \
		./integration/realflink/ | grep -v -e 'logging.go:[0-9]*: zk[0-9]|'"

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$${rest#*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s $$pkg || exit 1; \
	done

# Randomized runs of the two-site failover scenario across the three
# replication families (make test runs three). SEED replays a series; a
# failing run's own seed replays it alone (CKPTFS_SCENARIO_SEED).
RUNS ?= 200
SEED ?=
chaos: deps build
	@bash -o pipefail -c "CKPTFS_REQUIRE_ZK=1 CKPTFS_CHAOS_RUNS=$(RUNS) CKPTFS_CHAOS_SEED=$(SEED) \
		$(GO) test -count=1 -run '^TestChaos$$' -v -timeout 85m ./integration/scenario/ \
		| grep -v -e '^ *logging.go' -e '^=== RUN'"

# Randomized runs of the failover with real Flink: release (every one of
# flink/versions.tsv that runs here), replication kind and moment of loss
# drawn from SEED; prints a table like make chaos. About 100 s a run.
# MODE=hotstandby: Flink on both sites, takeover auto, no command after
# the loss (TestIntegration_HotStandby's run), no baseline runs.
chaos-flink: deps build
	@bash flink/fetch.sh $$(awk -F'\t' '!/^#/ && $$5 != "fails" { print $$1 }' flink/versions.tsv) >/dev/null
	@bash -o pipefail -c "CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FLINK=1 CKPTFS_CHAOS_FLINK_RUNS=$(RUNS) CKPTFS_CHAOS_FLINK_SEED=$(SEED) \
		CKPTFS_CHAOS_FLINK_MODE=$(MODE) \
		$(GO) test -count=1 -run '^TestChaosFlink$$' -v -timeout 600m ./integration/realflink/ \
		| grep -v -e '^ *logging.go' -e '^=== '"

# The real-Flink failover with the job's exactly-once sinks: a
# transactional KafkaSink to a real Kafka broker (KRaft) in the
# tie-breaker site and a FileSink on the replicated NAS, randomized from
# SEED over the releases with a Kafka connector here (flink/jars.tsv),
# the replication kind and the moment of loss; MODE=async|sync|strict
# (unset: sync and async in turn). Prints a table: the checkpoint Flink
# completed and the one DC2 restored, ckptfs's window, duplicates and
# gaps per sink, DC1's checkpoint durations. About 100 s a run.
chaos-eo: deps flink build
	@bash -o pipefail -c "CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FLINK=1 CKPTFS_CHAOS_EO_RUNS=$(RUNS) CKPTFS_CHAOS_EO_SEED=$(SEED) \
		CKPTFS_CHAOS_EO_MODE=$(MODE) \
		$(GO) test -count=1 -run '^TestChaosEO$$' -v -timeout 600m ./integration/realflink/ \
		| grep -v -e '^ *logging.go' -e '^=== '"

# Randomized network partitions with real Flink, real ZooKeeper (2+2+1
# servers placed in the sites) and real mounts on sites that are network
# hosts: the fault that cuts DC1 off (partition both ways, one way,
# flapping, loss), whether DC1 is first cut from DC2 only, the moment,
# the replication kind and the release drawn from SEED; every run brings
# DC1 back and turns the replication back the old way. Prints a table
# like make chaos, with the writes after the fence seen on DC2 (must be
# 0). About 100 s a run.
chaos-net: deps build
	@bash flink/fetch.sh $$(awk -F'\t' '!/^#/ && $$5 == "test" { print $$1 }' flink/versions.tsv) >/dev/null
	@bash -o pipefail -c "CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FLINK=1 CKPTFS_CHAOS_NET_RUNS=$(RUNS) CKPTFS_CHAOS_NET_SEED=$(SEED) \
		nice -n 19 $(GO) test -count=1 -run '^TestChaosNet$$' -v -timeout 600m ./integration/realflink/ \
		| grep -v -e '^ *logging.go' -e '^=== '"

# Randomized histories of ckptfs's own faults (design §6.13, issue 29):
# real ZooKeeper servers (3 or 5), the real binary as the mount daemons
# of two sites (several per site in part of the runs), writers and an
# emulated JobManager, or in about a third of the runs real Flink
# (the releases make flink fetches), writing through the mounts,
# replication DC1→DC2; daemons stopped, killed and frozen,
# CLOCK_REALTIME stepped (and put back), ZooKeeper sessions cut off,
# expired or killed inside any multi of takeovers, renewals, sweeps and
# restore-pruned, operators' edits, squatters, stray pointers, manual
# and automatic takeovers, restore-pruned, all drawn from SEED (run i
# uses SEED+i); a checker holds each history to the model
# (integration/jepsen/doc.go), with the pointers checked after every
# activation and, with real Flink, Flink restoring on the active site at
# the end. Prints a line per run and the totals; every violation count
# must be 0. A failing run's seed replays it alone (RUNS=1 SEED=<seed>);
# KEEP=<dir> keeps each run's history and output. About 40-60 s a run,
# with real Flink too: RUNS=100 takes about 1.5 hours.
KEEP ?=
jepsen: deps flink build
	@bash -o pipefail -c "CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_FLINK=1 CKPTFS_JEPSEN_RUNS=$(RUNS) CKPTFS_JEPSEN_SEED=$(SEED) CKPTFS_JEPSEN_KEEP=$(KEEP) \
		nice -n 19 $(GO) test -count=1 -run '^TestJepsen$$' -v -timeout $$(( $(RUNS) * 3 + 10 ))m ./integration/jepsen/ \
		| grep -v -e '^ *logging.go' -e '^=== ' -e '^ *--- PASS' -e '^PASS$$'"

# Real Flink destroying what a failover restored, and the promoted mount's
# deletion guard stopping it (issue 16): after a takeover, a restore that
# fails for a reason ckptfs cannot see and a bounded restart strategy end
# the job in FAILED; with the guard the checkpoint stays, without it
# Flink deletes it. About 2 to 4 minutes; not in make test. Also the
# real Flink 1.15.4 test of use-old-ha-services (fetched first).
guard-flink: deps flink build
	@bash flink/fetch.sh 1.15.4 >/dev/null
	CKPTFS_FAILED_JOB=1 $(REQUIRE) $(GO) test -count=1 -run '^(TestIntegration_RealFlinkFailedJob|TestIntegration_RealFlink115OldHAServices)$$' -v -timeout 30m ./integration/realflink/ \
		| grep -v -e '^ *logging.go' -e '^=== '

# Regenerates the fixtures harvested from real Flink (the ZooKeeper tree,
# HA files and _metadata of a running job, per release marked test, cold
# or tried; HARVEST_VERSIONS="1.4.2 1.15.4" narrows them) in
# integration/realflink/testdata; make test reads them without Flink.
harvest: deps flink build
	CKPTFS_HARVEST=integration/realflink/testdata CKPTFS_HARVEST_VERSIONS="$(HARVEST_VERSIONS)" $(REQUIRE) $(GO) test -count=1 -run '^TestHarvest$$' -v -timeout 20m ./integration/realflink/

# Regenerates the real-checkpoint corpus (integration/flinkdata/corpus):
# real Flink per release (CORPUS_VERSIONS, default the releases marked
# test) and kind (CORPUS_KINDS, default all: hashmap, rocksdb-full,
# rocksdb-incremental, changelog, changelog-compressed, file-merging,
# file-merging-across, unaligned, finished-broadcast, forst), each with its settings, job
# options and savepoints; make test walks the corpus without Flink.
# About 40 s per entry.
corpus: deps flink build
	CKPTFS_CORPUS=integration/flinkdata/corpus CKPTFS_CORPUS_VERSIONS="$(CORPUS_VERSIONS)" CKPTFS_CORPUS_KINDS="$(CORPUS_KINDS)" \
		$(REQUIRE) nice -n 19 $(GO) test -count=1 -run '^TestCorpus$$' -v -timeout 120m ./integration/realflink/

# Real Flink restores every committed corpus entry through a ckptfs replica
# mount; with one referenced file removed, the mount hides it and Flink
# fails without ckptfs too (CORPUS_KINDS and CORPUS_VERSIONS limit it;
# CORPUS_DIR restores from another corpus, such as corpus-all's). About
# 40 s per entry.
corpus-restore: deps flink build
	CKPTFS_CORPUS_DIR="$(CORPUS_DIR)" CKPTFS_CORPUS_RESTORE=1 CKPTFS_CORPUS_KINDS="$(CORPUS_KINDS)" CKPTFS_CORPUS_VERSIONS="$(CORPUS_VERSIONS)" \
		$(REQUIRE) nice -n 19 $(GO) test -count=1 -run '^TestCorpusRestore$$' -v -timeout 120m ./integration/realflink/

# The corpus of every release marked test or runs in flink/versions.tsv
# (CORPUS_VERSIONS, CORPUS_KINDS limit it), each kind it can write, into
# CORPUS_ALL_DIR outside the repository (too large to commit), then
# corpus-walk on it. About 5 to 10 minutes per release; not in make test.
CORPUS_ALL_DIR ?= $(CKPTFS_CACHE)/corpus
RUNS_VERSIONS = $(shell awk -F'\t' '!/^\#/ && ($$5 == "test" || $$5 == "cold" || $$5 == "runs") { print $$1 }' flink/versions.tsv)
corpus-all: deps flink build
	@bash flink/fetch.sh $(or $(CORPUS_VERSIONS),$(RUNS_VERSIONS)) >/dev/null
	CKPTFS_CORPUS=$(CORPUS_ALL_DIR) CKPTFS_CORPUS_VERSIONS="$(or $(CORPUS_VERSIONS),$(RUNS_VERSIONS))" CKPTFS_CORPUS_KINDS="$(CORPUS_KINDS)" \
		$(REQUIRE) nice -n 19 $(GO) test -count=1 -run '^TestCorpus$$' -v -timeout 600m ./integration/realflink/
	$(MAKE) corpus-walk CORPUS_DIR=$(CORPUS_ALL_DIR)

# The checks make test runs on the committed corpus, on the corpus in
# CORPUS_DIR instead (default corpus-all's): _metadata round trips,
# exact verification, named faults, HA files and the encoder's classes,
# the replica mount under the three replication simulators.
corpus-walk: build
	CKPTFS_CORPUS_DIR=$(or $(CORPUS_DIR),$(CORPUS_ALL_DIR)) $(REQUIRE) $(GO) test -count=1 ./manifest/ ./manifest/metadata/ ./manifest/flinkha/
	CKPTFS_CORPUS_DIR=$(or $(CORPUS_DIR),$(CORPUS_ALL_DIR)) $(REQUIRE) $(GO) test -count=1 -run '^TestMountReplicaCorpusSimulators$$' ./cmd/ckptfs/

# One narrated run of the two-site failover with real Flink (a JobManager
# and a TaskManager per site, five ZooKeeper servers, two ckptfs mounts),
# then real Flink without ckptfs on the same replica. When no Flink
# distribution can be fetched, the same story with the Flink emulator.
# Needs root and /dev/fuse.
demo: deps
	@if bash flink/fetch.sh 1.20.5 >/dev/null 2>/tmp/ckptfs-demo-fetch.log; then \
		$(GO) test -c -o $(BIN)/realflink.test ./integration/realflink/ && \
		CKPTFS_DEMO=1 CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_FLINK=1 $(BIN)/realflink.test -test.run '^TestDemoFlink$$' -test.timeout 10m; \
	else \
		echo "no Flink distribution could be fetched ($$(tail -1 /tmp/ckptfs-demo-fetch.log)): narrating the emulated run"; \
		$(GO) test -c -o $(BIN)/scenario.test ./integration/scenario/ && \
		CKPTFS_DEMO=1 CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 $(BIN)/scenario.test -test.run '^TestDemo$$' -test.timeout 5m; \
	fi

# A DR rehearsal on a staging pair (docs/runbook.md#rehearsing-a-failover):
# lays an emulated Flink job's ZooKeeper tree, under a namespace of its
# own, and two sites' NAS directories, one checkpoint not yet replicated,
# on the operator's ZooKeeper and STAGING directory, then prints the
# ckptfs commands to run and what each shows. CLEAN=1 removes it.
# DRILL_FLAGS: -path-root, -cluster-id, -flink RELEASE, -replace.
ZK          ?=
STAGING     ?=
CLEAN       ?=
DRILL_FLAGS ?=
dr-rehearsal:
	@if [ -z "$(STAGING)" ] || { [ -z "$(ZK)" ] && [ -z "$(CLEAN)" ]; }; then \
		echo "usage: make dr-rehearsal ZK=HOST:PORT[,...] STAGING=DIR [DRILL_FLAGS=...]"; \
		echo "       make dr-rehearsal STAGING=DIR CLEAN=1"; exit 2; \
	fi
	$(if $(CLEAN),,@$(MAKE) --no-print-directory build)
	@$(GO) build -o $(BIN)/drill ./integration/cmd/drill
	@$(abspath $(BIN))/drill $(if $(CLEAN),-clean,-ckptfs $(abspath $(BIN))/ckptfs) \
		$(if $(ZK),-zk '$(ZK)') -staging '$(STAGING)' $(DRILL_FLAGS)

# The example alert rules, checked and unit-tested by Prometheus's own
# promtool (Debian package prometheus). make test checks without it that
# the rules and the dashboard use only metrics ckptfs exports.
check-alerts:
	cd deploy/prometheus && promtool check rules ckptfs-alerts.yml && promtool test rules ckptfs-alerts_test.yml

# The alert rules in a real Prometheus (integration/alertse2e): Debian's
# prometheus, with the rules unchanged and a copy with every for: divided
# by 20, scraping real ckptfs daemons over real ZooKeeper and the node
# exporter's textfile collector; each alert driven by its fault, the time
# from fault to pending or firing logged, and a planned failover and a
# restore-pruned that fire nothing else. make test runs the short form
# (about 2.5 minutes, the emulated Flink); this adds a NAS hung past five
# minutes and the lag with real Flink 1.20.5. About 5 minutes.
alerts-e2e: deps flink
	@bash -o pipefail -c "CKPTFS_ALERTS_E2E=1 $(REQUIRE) $(GO) test -count=1 -run '^TestAlerts$$' -v -timeout 30m ./integration/alertse2e/ \
		| grep -v -e '^ *logging.go'"

# What an operator installs, laid out once by deploy/package/build.sh:
# the binary in /usr/bin, the mount helper /usr/sbin/mount.fuse.ckptfs,
# the units in /usr/lib/systemd/system, the drop-ins for Flink's units,
# the alert rules and the dashboard in /usr/share/ckptfs, the example
# /etc/ckptfs/ckptfs.yaml (kept when one exists), the documentation.
# make deb packs it as a Debian package (versioned from git, with its
# changelog and md5sums) into dist/; make install copies it into DESTDIR
# (default /) for hosts without dpkg; make release builds the static
# binaries of a release page, for amd64 and arm64, with the package and
# SHA256SUMS.
DIST    ?= dist
DESTDIR ?=
PKG_VERSION = $(shell bash deploy/package/build.sh version)
STATIC  = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(PKG_VERSION)"
deb:
	@mkdir -p $(DIST)
	$(STATIC) -o $(DIST)/ckptfs-linux-$$($(GO) env GOARCH) ./cmd/ckptfs
	@bash deploy/package/build.sh deb $(DIST) $(DIST)/ckptfs-linux-$$($(GO) env GOARCH)

install:
	$(STATIC) -o $(BIN)/ckptfs-static ./cmd/ckptfs
	@bash deploy/package/build.sh stage $(or $(DESTDIR),/) $(BIN)/ckptfs-static
	@[ -n "$(DESTDIR)" ] || { systemctl daemon-reload 2>/dev/null || true; \
		echo "now: edit /etc/ckptfs/ckptfs.yaml (ckptfs config from-flink), copy the drop-ins from /usr/share/ckptfs/systemd (docs/deploy.md)"; }

release: deb
	@for arch in amd64 arm64; do \
		GOARCH=$$arch $(STATIC) -o $(DIST)/ckptfs-linux-$$arch ./cmd/ckptfs || exit 1; \
	done
	@cd $(DIST) && rm -f SHA256SUMS && sha256sum ckptfs-linux-amd64 ckptfs-linux-arm64 ckptfs_$(PKG_VERSION)_*.deb > SHA256SUMS && cat SHA256SUMS

# The package and the units under a real systemd (integration/systemde2e):
# a Debian root file system made by debootstrap once (cached in
# $(CKPTFS_CACHE)/systemd), booted with systemd-nspawn -b, the package
# installed with apt-get; start and readiness, the takeover gate, kill -9
# of the daemon, stop with files open, an upgrade in place, a hung NAS,
# a reboot with ZooKeeper down; and a newcomer's route on make
# dr-rehearsal's layout (docs/deploy.md as written, the failover of the
# runbook with systemd, restore-pruned). make test runs the short form.
# About two minutes once the root file system is cached.
systemd-e2e: deps
	CKPTFS_SYSTEMD_E2E=1 $(REQUIRE) $(GO) test -count=1 -run '^TestSystemd' -v -timeout 20m ./integration/systemde2e/ \
		| grep -v -e '^ *logging.go'

clean:
	rm -rf $(BIN) $(DIST)
