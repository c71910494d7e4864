package main

import (
	"sync/atomic"

	"libsdp/sdpcore"
)

// connTable maps descriptors to their connections. Every send, receive and
// poll looks its descriptor up, so lookups take no lock: a two-level array
// of atomic pointers indexed by the descriptor (pages of 1,024 made on
// first use) answers them. Changes are made under mu and also kept in m,
// which the rare walks over all connections read (under mu).
type connTable struct {
	m     map[int]*sdpcore.Conn
	pages [connPages]atomic.Pointer[connPage]
}

const (
	connPageBits = 10
	connPages    = 1 << 11 // descriptors below 2^21, twice fs.nr_open's default ceiling (2^20)
)

type connPage [1 << connPageBits]atomic.Pointer[sdpcore.Conn]

func newConnTable() *connTable { return &connTable{m: map[int]*sdpcore.Conn{}} }

// get returns fd's connection or nil, without a lock below 2^21.
func (t *connTable) get(fd int) *sdpcore.Conn {
	if !inTable(fd) {
		// fs.nr_open raised past 2^21: such descriptors are looked up in m.
		mu.RLock()
		defer mu.RUnlock()
		return t.m[fd]
	}
	if p := t.pages[fd>>connPageBits].Load(); p != nil {
		return p[fd&(1<<connPageBits-1)].Load()
	}
	return nil
}

// set makes c fd's connection; mu is held.
func (t *connTable) set(fd int, c *sdpcore.Conn) {
	t.m[fd] = c
	if !inTable(fd) {
		return
	}
	p := t.pages[fd>>connPageBits].Load()
	if p == nil {
		p = new(connPage)
		t.pages[fd>>connPageBits].Store(p)
	}
	p[fd&(1<<connPageBits-1)].Store(c)
}

// del forgets fd's connection; mu is held.
func (t *connTable) del(fd int) {
	delete(t.m, fd)
	if !inTable(fd) {
		return
	}
	if p := t.pages[fd>>connPageBits].Load(); p != nil {
		p[fd&(1<<connPageBits-1)].Store(nil)
	}
}

// inTable says whether fd has a slot in the array.
func inTable(fd int) bool { return fd >= 0 && fd < connPages<<connPageBits }
