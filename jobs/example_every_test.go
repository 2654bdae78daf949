package jobs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/jobs"
)

// A periodic job: it runs every interval between Start and Stop, on its own
// context that keeps the values of the Start context (such as the leader
// term) but not its cancellation.
func ExampleEvery() {
	type requestKey struct{}
	runs := make(chan string)
	job := jobs.Every(10*time.Millisecond, func(ctx context.Context) error {
		select {
		case runs <- fmt.Sprint("run with ", ctx.Value(requestKey{})):
		case <-ctx.Done():
		}
		return nil
	}, jobs.WithImmediate(), jobs.WithJitter(0.1), jobs.WithName("example"))

	startCtx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestKey{}, "term 7"), 15*time.Second)
	defer cancel()
	if err := job.Start(startCtx); err != nil {
		fmt.Println(err)
		return
	}
	cancel() // the job's runs do not end with the start context
	for range 3 {
		fmt.Println(<-runs)
	}
	if err := job.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("stopped")
	// Output:
	// run with term 7
	// run with term 7
	// run with term 7
	// stopped
}

// Bad input never panics: Start reports it, naming the value.
func ExampleEvery_badInput() {
	job := jobs.Every(0, func(context.Context) error { return nil }, jobs.WithJitter(1.5))
	fmt.Println(job.Start(context.Background()))
	// Output:
	// jobs: WithJitter(1.5): fraction must be in [0, 1)
	// jobs: Every(0s): interval must be positive
}
