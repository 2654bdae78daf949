package peers_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// client-go logs every election step through klog; keep benchmark output
	// to the figures.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
