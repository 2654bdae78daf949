package apiservertest_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leaderaware/leaderaware/k8slease"
	"github.com/leaderaware/leaderaware/k8slease/apiservertest"
)

// server is the API server of the tests: one per test binary, each test in
// namespaces of its own.
var server *apiservertest.Server

// TestMain starts the API server, runs the tests, and checks that they
// leave no goroutine behind: every store is closed, which stops its watch.
// The API server's own goroutines, and the connections of the clients to
// it, are those running before the tests, or of the client-go and
// apiserver packages.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "apiservertest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	server, err = apiservertest.StartProgram(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer server.Stop()
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(append(ignoreClients(), before)...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// ignoreClients are the goroutines of HTTP/2 connections that client-go
// keeps open in its shared transports, their server side, and the API
// server's.
func ignoreClients() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*serverConn).serve"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*serverConn).readFrames"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*serverConn).writeFrameAsync"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		// the API server's wait for a fresh watch cache, which ends on its own
		goleak.IgnoreAnyFunction("k8s.io/apiserver/pkg/storage/cacher.(*watchCache).waitUntilFreshLocked.func2"),
		// the API server's merge of its OpenAPI documents after a request,
		// which ends on its own (seen runnable at the check on a loaded machine)
		goleak.IgnoreAnyFunction("k8s.io/kube-openapi/pkg/cached.(*listMerger[...]).prepareResultsLocked.gowrap1"),
	}
}

var namespaces atomic.Int64

// newNamespace creates a namespace for t.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, namespaces.Add(1))
	_, err := admin(t).CoreV1().Namespaces().Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

// admin returns a client with all rights.
func admin(t testing.TB) kubernetes.Interface {
	return client(t, server.Config)
}

func client(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// newStore returns a store on the Leases of namespace, with a client of
// its own, closed at the end of t.
func newStore(t testing.TB, namespace string, opts ...k8slease.Option) *k8slease.Store {
	t.Helper()
	s, err := k8slease.New(admin(t), namespace, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
