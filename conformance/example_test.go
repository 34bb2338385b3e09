package conformance_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/locksmith-go/lock/conformance"
)

// A Detector counts holders that found another holder inside. Use it in your
// own tests around the code a lock protects.
func ExampleDetector() {
	var (
		d  conformance.Detector
		mu sync.Mutex // stands in for a distributed lock
		wg sync.WaitGroup
	)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			d.Hold(time.Millisecond)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println("entries:", d.Entries(), "overlaps:", d.Overlaps())
	// Output: entries: 4 overlaps: 0
}
