// Command sdpstat lists the processes that use libsdp and their
// sockets: addresses as the application sees them, transport (SDP or TCP)
// and why, and the SDP counters of each connection.
//
// Every process with the engine loaded publishes a snapshot about twice a
// second in a directory private to its user (see internal/statsfile);
// sdpstat reads those, ignoring and removing the files of processes that
// are gone, and finds preloaded processes without an engine yet in /proc.
// It does not attach to or signal the processes it lists.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"libsdp/internal/statsfile"
)

const usage = `usage: sdpstat [-p PID] [-w [SECONDS]] [--json]

Lists the processes using libsdp and their sockets: transport (sdp, tcp,
tcp+sdp for listeners) and, for TCP, the reason; SDP counters per connection.

  -p, --pid PID        only this process
  -w, --watch [SECS]   refresh every SECS seconds (default 1) until interrupted
  -j, --json           machine-readable output (one JSON document per refresh)
  -h, --help           this text

A process publishes its counters once its engine is loaded, at its first
SDP connection; before that sdpstat finds it in /proc (it maps libsdp.so)
and shows its sockets as the kernel sees them.
`

type options struct {
	pid   int
	watch time.Duration
	json  bool
}

// errHelp asks for the usage text on stdout and a zero exit.
var errHelp = errors.New("help")

func parseArgs(args []string) (options, error) {
	var o options
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "-h", "--help", "-help":
			return o, errHelp
		case "-j", "--json", "-json":
			if hasVal {
				return o, fmt.Errorf("%s takes no value", name)
			}
			o.json = true
		case "-p", "--pid", "-pid":
			if !hasVal {
				if i+1 >= len(args) {
					return o, fmt.Errorf("%s needs a process id", name)
				}
				i++
				val = args[i]
			}
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("%s %q: not a process id", name, val)
			}
			o.pid = n
		case "-w", "--watch", "-watch":
			o.watch = time.Second
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				val, hasVal = args[i], true
			}
			if hasVal {
				secs, err := strconv.ParseFloat(val, 64)
				if err != nil || !(secs >= 0.1 && secs <= 86400) {
					return o, fmt.Errorf("%s %q: want seconds between 0.1 and 86400", name, val)
				}
				o.watch = time.Duration(secs * float64(time.Second))
			}
		default:
			return o, fmt.Errorf("unknown option %q", a)
		}
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if errors.Is(err, errHelp) {
		fmt.Print(usage)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdpstat: %v\n%s", err, usage)
		os.Exit(2)
	}
	if o.watch == 0 {
		os.Exit(show(os.Stdout, os.Stderr, o, false))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(o.watch)
	defer t.Stop()
	for {
		show(os.Stdout, os.Stderr, o, true)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// show prints one listing and returns the exit code.
func show(out, errOut io.Writer, o options, watching bool) int {
	now := time.Now()
	entries, errs := load(now)
	for _, err := range errs {
		fmt.Fprintf(errOut, "sdpstat: %v\n", err)
	}
	if o.pid != 0 {
		var keep []statsfile.Entry
		for _, e := range entries {
			if e.PID == o.pid {
				keep = append(keep, e)
			}
		}
		entries = keep
	}
	missing := o.pid != 0 && len(entries) == 0
	if o.json {
		if err := writeJSON(out, entries); err != nil {
			fmt.Fprintf(errOut, "sdpstat: %v\n", err)
			return 1
		}
	} else if !missing || watching {
		if watching {
			fmt.Fprint(out, "\x1b[H\x1b[2J")
			fmt.Fprintf(out, "sdpstat  %s\n\n", now.Format("15:04:05"))
		}
		writeTable(out, entries)
	}
	if missing {
		fmt.Fprintf(errOut, "sdpstat: process %d is not using libsdp (not running, not preloaded, "+
			"or another user's)\n", o.pid)
		return 1
	}
	return 0
}

// load reads the caller's own directory; root reads every user's.
func load(now time.Time) ([]statsfile.Entry, []error) {
	dirs := map[int]string{}
	uid := os.Getuid()
	if uid == 0 {
		dirs = statsfile.AllDirs()
	} else {
		dirs[uid] = statsfile.Dir(uid)
	}
	var all []statsfile.Entry
	var errs []error
	for owner, dir := range dirs {
		if err := statsfile.CheckDir(dir, owner); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%v; not read", err))
			}
			continue
		}
		es, e := statsfile.Load(dir, true, now)
		all = append(all, es...)
		errs = append(errs, e...)
	}
	have := map[int]bool{}
	for _, e := range all {
		have[e.PID] = true
	}
	all = append(all, scanPreloaded(have)...)
	sort.Slice(all, func(i, j int) bool { return all[i].PID < all[j].PID })
	return all, errs
}

type jsonProcess struct {
	statsfile.Process
	AgeMs int64 `json:"age_ms"`
}

type jsonOutput struct {
	Processes []jsonProcess `json:"processes"`
}

func writeJSON(w io.Writer, entries []statsfile.Entry) error {
	doc := jsonOutput{Processes: []jsonProcess{}}
	for _, e := range entries {
		doc.Processes = append(doc.Processes, jsonProcess{Process: e.Process, AgeMs: e.Age.Milliseconds()})
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// stale is the age beyond which a snapshot is flagged: the engine
// refreshes it every half second.
const stale = 5 * time.Second

func writeTable(w io.Writer, entries []statsfile.Entry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no process is using libsdp")
		return
	}
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(w)
		}
		var nSDP, nTCP int
		for _, s := range e.Sockets {
			switch s.Transport {
			case "sdp":
				nSDP++
			case "tcp":
				nTCP++
			}
		}
		note := ""
		if !e.EngineLoaded {
			note = "  (engine not loaded: no SDP connection yet; sockets as the kernel sees them)"
		} else if e.Age > stale {
			note = fmt.Sprintf("  (not updated for %.0f s: stopped, or no longer running the engine)", e.Age.Seconds())
		}
		fmt.Fprintf(w, "PID %d  %s  sockets=%d sdp=%d tcp=%d%s\n", e.PID, e.Prog, len(e.Sockets), nSDP, nTCP, note)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FD\tKIND\tTRANSPORT\tREASON\tLOCAL\tREMOTE\tSTATE\tSDP\tFLOW\tBUFFERING\tPROGRESS\tPAYLOAD_TX\tPAYLOAD_RX\tFPDUS_TX\tFPDUS_RX\tMARKERS_TX\tMARKERS_RX\tCRC_ERR\tBCOPY_B\tZCOPY_B\tZCOPY_N\tSTALLS\tCOALESCED\tCOPIES/B")
		for _, s := range e.Sockets {
			local := dash(s.Local)
			if s.SDPPort != 0 {
				local += " (sdp " + strconv.Itoa(s.SDPPort) + ")"
			}
			transport := dash(s.Transport)
			if s.SDP != nil && s.SDP.Link != "" && s.Transport == "sdp" {
				transport += "/" + s.SDP.Link // sdp/shm or sdp/iwarp
			}
			row := []string{strconv.Itoa(s.FD), dash(s.Kind), transport, dash(s.Reason), local,
				dash(s.Remote), dash(s.State)}
			if d := s.SDP; d != nil {
				row = append(row, d.State, dash(d.FlowControl), dash(d.Buffering), dash(d.Progress),
					u(d.PayloadTx), u(d.PayloadRx), u(d.FPDUsTx), u(d.FPDUsRx), u(d.MarkersTx), u(d.MarkersRx),
					u(d.CRCErrors), u(d.BCopyTx+d.BCopyRx), u(d.ZCopyTx+d.ZCopyRx), u(d.ZCopySends), u(d.CreditStalls), u(d.Coalesced),
					fmt.Sprintf("%.2f/%.2f", d.CopiesPerByteTx, d.CopiesPerByteRx))
			} else {
				for range 17 {
					row = append(row, "-")
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }
