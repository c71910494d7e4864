package main

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"libsdp/sdpcore"

	"golang.org/x/sys/unix"
)

// Closed connections that still have to be finished (sdpcore.Lingering)
// are finished by one goroutine, waiting for all their sockets in one epoll
// set. A goroutine for each close, started from the application's thread,
// cost a wake-up of another thread at every close and again when it ended,
// and kept the Go runtime's monitor polling every 20 µs: most of what a
// connection without keep-alive cost a server over SDP.

type lingerEntry struct {
	l        *sdpcore.Lingering
	deadline time.Time // the next Step at the latest
	finish   func()    // after Release: settled, accounted
}

var lingers struct {
	once    sync.Once
	epfd    int
	file    *os.File        // epfd, for the runtime's poller: lingerLoop holds no thread while it waits
	rc      syscall.RawConn // file's
	err     error
	mu      sync.Mutex
	entries map[uint64]*lingerEntry // by id, the epoll data word: a descriptor's number is reused
	nextID  uint64
}

// lingerScan is how often at most the loop looks for connections whose
// deadline passed (a Step's wait is SettleIdle/5 or more; a little later
// than asked is no harm).
const lingerScan = 100 * time.Millisecond

// linger finishes l, calling finish when it is done. The first step runs
// here: a peer that has everything already costs no wake-up.
func linger(l *sdpcore.Lingering, finish func()) {
	e := &lingerEntry{l: l, finish: finish}
	done, ev, wait := stepLinger(e, time.Now())
	if done {
		e.release()
		return
	}
	lingers.once.Do(openLingerSet)
	if lingers.err == nil {
		e.deadline = time.Now().Add(wait)
		lingers.mu.Lock()
		lingers.nextID++
		id := lingers.nextID
		lingers.entries[id] = e
		lingers.mu.Unlock()
		err := arm(unix.EPOLL_CTL_ADD, e, id, ev)
		if err == nil {
			return
		}
		lingers.mu.Lock()
		delete(lingers.entries, id)
		lingers.mu.Unlock()
		logf(levelWarn, "fd %d: linger set: %v", l.Fd(), err)
	}
	e.alone()
}

// openLingerSet makes the epoll set, away from the application's numbers
// and kept from its close, and starts lingerLoop on it.
func openLingerSet() {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		lingers.err = err
		return
	}
	if hi, err := unix.FcntlInt(uintptr(epfd), unix.F_DUPFD_CLOEXEC, sdpcore.FdFloor); err == nil {
		unix.Close(epfd)
		epfd = hi
	}
	if sdpcore.OwnFd != nil {
		sdpcore.OwnFd(epfd, true)
	}
	if lingers.err = unix.SetNonblock(epfd, true); lingers.err != nil {
		return
	}
	lingers.epfd, lingers.file = epfd, os.NewFile(uintptr(epfd), "linger set")
	if lingers.rc, lingers.err = lingers.file.SyscallConn(); lingers.err != nil {
		return
	}
	lingers.entries = make(map[uint64]*lingerEntry)
	goSafe(lingerLoop)
}

// arm (re)registers e's socket for one report of ev.
func arm(op int, e *lingerEntry, id uint64, ev int16) error {
	event := unix.EpollEvent{Events: uint32(ev)&(unix.EPOLLIN|unix.EPOLLOUT) | unix.EPOLLONESHOT,
		Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	return unix.EpollCtl(lingers.epfd, op, e.l.Fd(), &event)
}

// stepLinger runs one step of e; a panic in it ends the connection as done.
func stepLinger(e *lingerEntry, now time.Time) (done bool, ev int16, wait time.Duration) {
	done = true
	safely(func() { done, ev, wait = e.l.Step(now) })
	return done, ev, wait
}

// release closes e's socket and finishes it.
func (e *lingerEntry) release() {
	e.l.Release()
	e.finish()
}

// alone finishes e in a goroutine of its own, for when the set cannot.
func (e *lingerEntry) alone() {
	goSafe(func() {
		defer e.finish()
		e.l.Finish()
	})
}

// lingerLoop steps the connections whose sockets reported, and those whose
// deadline passed, until the process ends. It waits in the runtime's
// poller, not in epoll_wait: a goroutine blocked in a system call holds a P,
// which the runtime's monitor then hands off every 20 µs.
func lingerLoop() {
	events := make([]unix.EpollEvent, 64)
	var due []uint64
	nextScan := time.Now()
	var deadline time.Time // the file's read deadline, as last set
	n := 0
	look := func(fd uintptr) bool {
		n, _ = unix.EpollWait(int(fd), events, 0)
		return n > 0
	}
	for {
		now := time.Now()
		due = due[:0]
		if !now.Before(nextScan) {
			nextScan = now.Add(lingerScan)
			lingers.mu.Lock()
			for id, e := range lingers.entries {
				if !now.Before(e.deadline) {
					due = append(due, id)
				} else if e.deadline.Before(nextScan) {
					nextScan = e.deadline
				}
			}
			lingers.mu.Unlock()
		}
		if len(due) > 0 {
			look(uintptr(lingers.epfd))
		} else {
			if !nextScan.Equal(deadline) {
				// Only when it moved: each setting resets a runtime
				// timer, which may wake the thread in the poller.
				deadline = nextScan
				_ = lingers.file.SetReadDeadline(deadline)
			}
			if err := lingers.rc.Read(look); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				// Not seen; the deadlines still step every connection.
				logf(levelWarn, "linger set: %v", err)
				n = 0
				time.Sleep(lingerScan)
			}
		}
		for _, ev := range events[:max(n, 0)] {
			due = append(due, uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32)
		}
		now = time.Now()
		for _, id := range due {
			lingers.mu.Lock()
			e := lingers.entries[id]
			lingers.mu.Unlock()
			if e == nil {
				continue // reported and due both: done at the first step
			}
			done, ev, wait := stepLinger(e, now)
			if !done {
				e.deadline = now.Add(wait)
				err := arm(unix.EPOLL_CTL_MOD, e, id, ev)
				if err == nil {
					continue
				}
				logf(levelWarn, "fd %d: linger set: %v", e.l.Fd(), err)
			}
			// Out of the set before the socket is closed: a forked child
			// may hold it open, and the kernel would keep the registration.
			_ = unix.EpollCtl(lingers.epfd, unix.EPOLL_CTL_DEL, e.l.Fd(), nil)
			lingers.mu.Lock()
			delete(lingers.entries, id)
			lingers.mu.Unlock()
			if done {
				e.release()
			} else {
				e.alone()
			}
		}
	}
}
