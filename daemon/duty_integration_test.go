package daemon

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// freeAddr returns a loopback address no listener holds now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeSeries returns every sample of addr's /metrics by series text.
func scrapeSeries(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds the samples of the series whose text starts with prefix.
func sum(m map[string]float64, prefix string) (float64, bool) {
	var s float64
	found := false
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			s, found = s+v, true
		}
	}
	return s, found
}

// TestIntegration_SiteDuty: of two daemons of one site, one holds the
// site's duty (design §5.5.3) and publishes, sweeps and computes the
// lag; the other does none of it and exports no lag. When the holder
// ends, the other takes the duty over.
func TestIntegration_SiteDuty(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	backing := t.TempDir()
	if err := os.MkdirAll(filepath.Join(backing, "checkpoints", "0123456789abcdef0123456789abcdef", "chk-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	var ds []*testDaemon
	for _, addr := range addrs {
		ds = append(ds, startSiteDaemon(t, c, "dc2", backing, fusefs.ModeReplica, func(cfg *Config) {
			cfg.MetricsAddr, cfg.LagInterval = addr, time.Second
		}))
	}
	type view struct {
		duty, passes, sweeps float64
		lag                  bool
	}
	look := func(addr string) (view, error) {
		m, err := scrapeSeries(addr)
		if err != nil {
			return view{}, err
		}
		var v view
		var ok bool
		if v.duty, ok = sum(m, "ckptfs_site_duty{"); !ok {
			return v, fmt.Errorf("%s: no ckptfs_site_duty yet", addr)
		}
		v.passes, _ = sum(m, "ckptfs_reconcile_passes_total{")
		v.sweeps, _ = sum(m, "ckptfs_sweep_actions_total{")
		_, v.lag = sum(m, "ckptfs_lag_last_update_timestamp_seconds{")
		return v, nil
	}
	var holder int
	waitDuty := func(want []int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var vs []view
			var err error
			for _, i := range want {
				var v view
				if v, err = look(addrs[i]); err != nil {
					break
				}
				vs = append(vs, v)
			}
			held := 0
			if err == nil {
				for k, v := range vs {
					if v.duty == 1 {
						held++
						holder = want[k]
					}
				}
			}
			if err == nil && held == 1 {
				h := vs[0]
				for k, v := range vs {
					if want[k] == holder {
						h = v
					} else if v.passes != 0 || v.lag {
						t.Fatalf("%s: daemon %d does not hold the duty but published (%v passes) or exports the lag (%v)", what, want[k], v.passes, v.lag)
					}
				}
				if h.passes > 0 && h.lag {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d holders, %v (last error %v)", what, held, vs, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitDuty([]int{0, 1}, "two daemons")
	first := holder
	ds[first].end(t)
	waitDuty([]int{1 - first}, "the holder ended")
	t.Logf("daemon %d held the duty, then daemon %d", first, holder)
}
