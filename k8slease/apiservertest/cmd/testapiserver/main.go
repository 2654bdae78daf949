// Command testapiserver runs the test API server of package apiservertest
// (a kube-apiserver with an embedded etcd, data in a temporary directory)
// until interrupted, and writes a kubeconfig for it, for trying k8slease
// programs such as leaderd -k8s without a cluster:
//
//	go run ./cmd/testapiserver -kubeconfig /tmp/test.kubeconfig
//	leaderd -k8s default -kubeconfig /tmp/test.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leaderaware/leaderaware/k8slease/apiservertest"
)

func main() {
	path := flag.String("kubeconfig", "test.kubeconfig", "where to write the kubeconfig `file`")
	flag.Parse()
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "testapiserver:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	dir, err := os.MkdirTemp("", "testapiserver")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := apiservertest.StartProgram(dir)
	if err != nil {
		return err
	}
	defer s.Stop()
	c := s.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData, InsecureSkipTLSVerify: c.Insecure, TLSServerName: c.ServerName}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	fmt.Printf("kube-apiserver at %s; kubeconfig in %s; Ctrl-C stops it\n", c.Host, path)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
