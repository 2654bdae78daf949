// Package apiservertest starts a real kube-apiserver, with an embedded etcd,
// inside a test process, so that Kubernetes stores are tested against the
// API server's own compare-and-set, watches and RBAC rather than a fake
// clientset. It is its own module: users of k8slease never download
// k8s.io/kubernetes.
package apiservertest

import (
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// TB is what Start needs of a test: a *testing.T or *testing.B, or the
// stand-in of a program that runs a server outside a test.
type TB = ktesting.TB

// Server is a running kube-apiserver and its etcd.
type Server struct {
	// Config is a client configuration with all rights (the API server's
	// loopback identity, in group system:masters).
	Config *rest.Config
	stop   func()
}

// Start starts etcd (data in tb.TempDir(), on loopback) and a kube-apiserver
// on it, with RBAC authorization, and waits until both serve. tb.Cleanup
// stops them.
func Start(tb TB) (*Server, error) {
	s, err := start(tb, tb.TempDir())
	if err != nil {
		return nil, err
	}
	tb.Cleanup(s.stop)
	return s, nil
}

// StartProgram is Start for a program or a TestMain: the data goes in dir,
// the API server's log goes nowhere, and Stop stops the servers.
func StartProgram(dir string) (*Server, error) {
	p := &program{dir: dir}
	s, err := start(p, dir)
	if err != nil {
		p.cleanup()
		return nil, err
	}
	stop := s.stop
	s.stop = func() { stop(); p.cleanup() }
	return s, nil
}

// Stop stops a Server from StartProgram. Servers from Start stop at the
// end of their test.
func (s *Server) Stop() { s.stop() }

func start(tb TB, dir string) (*Server, error) {
	etcd, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{"http://" + etcd.Clients[0].Addr().String()}
	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	opts.DisableInvariantChecks = true
	api, err := kubeapiservertesting.StartTestServer(tb, opts, []string{"--authorization-mode=RBAC"}, storage)
	if err != nil {
		etcd.Close()
		return nil, fmt.Errorf("apiservertest: start kube-apiserver: %w", err)
	}
	return &Server{Config: api.ClientConfig, stop: sync.OnceFunc(func() { api.TearDownFn(); etcd.Close() })}, nil
}

// startEtcd starts a single-member etcd on loopback ports the kernel picks.
func startEtcd(dir string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("apiservertest: etcd: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("apiservertest: etcd did not start within a minute")
	}
}
