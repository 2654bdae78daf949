package main

import (
	"context"
	"flag"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/k8slease"
)

// k8sFlags adds -k8s and -kubeconfig to fs.
func k8sFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.k8s, "k8s", "", "Kubernetes `namespace` whose Lease objects hold the leases, instead of -db;\n"+
		"the jobs are then the simpler fenced passes described above")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig `file` of -k8s (default: the in-cluster config of the pod)")
}

// k8sStore is a k8slease.Store with the client leaderd made for it.
type k8sStore struct {
	*k8slease.Store
	client kubernetes.Interface
}

// openK8s returns the store of o.k8s, on the cluster of o.kubeconfig or,
// without one, of the pod leaderd runs in.
func openK8s(o options) (*k8sStore, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w (outside a pod, pass -kubeconfig)", err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	s, err := k8slease.New(c, o.k8s)
	if err != nil {
		return nil, err
	}
	return &k8sStore{Store: s, client: c}, nil
}

// names returns the lease names of the Lease objects in the namespace.
func (s *k8sStore) names(ctx context.Context) ([]string, error) {
	list, err := s.client.CoordinationV1().Leases(s.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list the Leases of namespace %q: %w", s.Namespace(), err)
	}
	var names []string
	for _, l := range list.Items {
		if name, err := k8slease.LeaseName(l.Name); err == nil {
			names = append(names, name)
		}
	}
	return names, nil
}

// fence is the check of each pass of the demo's jobs on Kubernetes, which
// has no fenced transactions: the Lease must still hold the term's token,
// as a resource fenced with the token would check it.
func (s *k8sStore) fence(ctx context.Context) error {
	term, ok := elector.LeaseFromContext(ctx)
	if !ok {
		return fmt.Errorf("kubernetes: no term in the context: %w", elector.ErrLeaseLost)
	}
	cur, err := s.Get(ctx, term.Name)
	if err != nil {
		return err
	}
	if cur.Token != term.Token || cur.Holder != term.Holder {
		return fmt.Errorf("kubernetes: lease %q has token %d of %q, not this term's %d: %w", term.Name, cur.Token, cur.Holder, term.Token, elector.ErrLeaseLost)
	}
	return nil
}
