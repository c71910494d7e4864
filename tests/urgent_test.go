package tests

import (
	"context"
	"path/filepath"
	"testing"
)

// Urgent data in every flow-control and progress mode: oob.c (mark, SIOCATMARK, MSG_OOB,
// MSG_PEEK, SO_OOBINLINE, POLLPRI and EPOLLPRI; "early": an urgent byte sent right after
// connect, while the accepting side still chooses shared memory) and sigurg.c (SIGURG to the socket's owner
// while blocked in poll and in read, marks overtaken by newer ones, several in a row) run
// over plain TCP, which gives the expected results, and with both ends preloaded.

var urgentFamilies = []family{
	{name: "oob", prog: "oob", part: "-", conns: 1},
	{name: "oob-early", prog: "oob", part: "early", conns: 1},
	{name: "sigurg-pid", prog: "sigurg", part: "pid", conns: 1},
	{name: "sigurg-pgrp", prog: "sigurg", part: "pgrp", conns: 1},
	{name: "sigurg-tid", prog: "sigurg", part: "tid", conns: 1},
	{name: "sigurg-late", prog: "sigurg", part: "late", conns: 1},
	{name: "sigurg-ioctl", prog: "sigurg", part: "ioctl", conns: 1},
	{name: "sigurg-inhandler", prog: "sigurg", part: "inhandler", conns: 1},
	{name: "sigurg-longjmp", prog: "sigurg", part: "longjmp", conns: 1},
}

func TestUrgentModes(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), urgentFamilies)
	modes := []string{"plain"}
	for _, fc := range []string{"credit", "rdma", "nic", "transport"} {
		for _, pr := range []string{"inline", "async"} {
			modes = append(modes, fc+"/"+pr)
		}
	}
	for _, f := range urgentFamilies {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, m := range modes {
				t.Run(m, func(t *testing.T) {
					runUrgent(t, shim, bins[f.prog], f, m)
				})
			}
		})
	}
}

// runUrgent runs one program pair, both ends preloaded with the modes m ("fc/progress"), or
// neither ("plain").
func runUrgent(t *testing.T, shim, bin string, f family, m string) {
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(cancel)
	plain := m == "plain"
	env := func(prefix string) []string {
		e := cleanEnv()
		if !plain {
			fc, pr := filepath.Split(m)
			e = append(sdpEnv(shim, filepath.Join(dir, prefix+".%p.log")),
				"SDP_FLOW_CONTROL="+filepath.Clean(fc), "SDP_PROGRESS="+pr)
		}
		return append(e, "TMPDIR="+dir)
	}
	srv := startC(ctx, t, dir, "server", env("server"), bin, "server", f.part)
	ports := srv.waitPorts(t)
	cli := startC(ctx, t, dir, "client", env("client"), bin, append([]string{"client", f.part}, ports...)...)
	cli.wait(ctx, t)
	srv.wait(ctx, t)
	if t.Failed() || plain {
		return
	}
	w := f.want(capiConfig{serverPreload: true, clientPreload: true})
	checkTransport(t, dir, "client", w.client)
	checkTransport(t, dir, "server", w.server)
}
