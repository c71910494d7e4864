package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEngineCallbackTakesNoLock: the engine is built with the runtime's wait for its
// initialisation made lock-free once that is done (scripts/go-overlay.sh): the function every
// call from the application's threads into the engine runs (runtime.cgocallbackg1) does not
// block on the runtime's channel without a non-blocking receive first. A build without the
// overlay fails here: each call would take a global lock again.
func TestEngineCallbackTakesNoLock(t *testing.T) {
	setup(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "go is not in PATH")
	out, err := exec.Command(goTool, "tool", "objdump", "-s", `^runtime\.cgocallbackg1$`,
		filepath.Join(root, "build", "libsdp-engine.so")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	require.Contains(t, text, "TEXT runtime.cgocallbackg1", "objdump found no runtime.cgocallbackg1")
	blocking := strings.Contains(text, "CALL runtime.chanrecv1(SB)")
	tried := strings.Contains(text, "CALL runtime.selectnbrecv(SB)")
	require.True(t, !blocking || tried,
		"runtime.cgocallbackg1 blocks on main_init_done without trying first: the engine was built without scripts/go-overlay.sh's overlay (or the runtime changed: see the script)")
}
