package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/sdpcore"
)

// TestConnTable: what set stores, get finds without the lock, on the
// array's pages and beyond them (a raised fs.nr_open), and del forgets.
func TestConnTable(t *testing.T) {
	tab := newConnTable()
	a, b := new(sdpcore.Conn), new(sdpcore.Conn)
	fds := []int{0, 3, 1023, 1024, 70000, connPages<<connPageBits - 1, connPages << connPageBits, 1 << 30}
	for _, fd := range fds {
		require.Nil(t, tab.get(fd), "fd %d before set", fd)
	}
	require.Nil(t, tab.get(-1))
	mu.Lock()
	for i, fd := range fds {
		tab.set(fd, []*sdpcore.Conn{a, b}[i%2])
	}
	mu.Unlock()
	for i, fd := range fds {
		require.Same(t, []*sdpcore.Conn{a, b}[i%2], tab.get(fd), "fd %d", fd)
	}
	require.Nil(t, tab.get(4), "a neighbour on a page in use")
	require.Len(t, tab.m, len(fds))
	mu.Lock()
	for _, fd := range fds {
		tab.del(fd)
	}
	tab.del(5) // never set
	mu.Unlock()
	for _, fd := range fds {
		require.Nil(t, tab.get(fd), "fd %d after del", fd)
	}
	require.Empty(t, tab.m)
}
