package apiservertest

import (
	"fmt"
	"os"
	"sync"
)

// program is the TB of StartProgram: it logs nothing, fails by recording
// the error (StartTestServer returns it too), and runs its cleanups when
// the server stops.
type program struct {
	dir string

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

func (p *program) Attr(key, value string) {}
func (p *program) Chdir(dir string)       { panic("apiservertest: Chdir is not supported outside a test") }
func (p *program) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}
func (p *program) Error(args ...any)                 { p.Fail() }
func (p *program) Errorf(format string, args ...any) { p.Fail() }
func (p *program) Fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
}
func (p *program) FailNow() { panic("apiservertest: the API server failed to start") }
func (p *program) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
func (p *program) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (p *program) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (p *program) Helper()                          {}
func (p *program) Log(args ...any)                  {}
func (p *program) Logf(format string, args ...any)  {}
func (p *program) Name() string                     { return "apiservertest" }
func (p *program) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (p *program) Skip(args ...any)                 { p.SkipNow() }
func (p *program) Skipf(format string, args ...any) { p.SkipNow() }
func (p *program) SkipNow()                         { panic("apiservertest: Skip outside a test") }
func (p *program) Skipped() bool                    { return false }
func (p *program) TempDir() string {
	d, err := os.MkdirTemp(p.dir, "tmp")
	if err != nil {
		panic(err)
	}
	return d
}

// cleanup runs the cleanups, last first.
func (p *program) cleanup() {
	p.mu.Lock()
	fs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
