package main

import (
	"fmt"
	"time"
)

// writerUse is what the instances' writers did while the runs ran, from
// their /metrics: how many group commits, how large, how long. It tells a
// latency spent committing from one spent after the commit.
type writerUse struct {
	commits, records float64
	busy             time.Duration // summed over the instances
	ok               bool
}

var writerSeries = []string{"herd_writer_batch_seconds_count", "herd_writer_batch_records_sum", "herd_writer_batch_seconds_sum"}

func markWriter(s server) writerUse {
	vs, err := s.scrape(writerSeries...)
	if err != nil {
		return writerUse{}
	}
	return writerUse{commits: vs[0], records: vs[1], busy: time.Duration(vs[2] * float64(time.Second)), ok: true}
}

func (w writerUse) since(from writerUse) writerUse {
	if !w.ok || !from.ok {
		return writerUse{}
	}
	return writerUse{commits: w.commits - from.commits, records: w.records - from.records, busy: w.busy - from.busy, ok: true}
}

func (w writerUse) print(wall time.Duration, instances int) {
	if !w.ok || w.commits == 0 {
		return
	}
	fmt.Printf("writer: %.0f commits of %.1f records on average, %.2f ms each; busy %.0f%% of the time (per instance)\n",
		w.commits, w.records/w.commits, ms(w.busy)/w.commits, 100*w.busy.Seconds()/wall.Seconds()/float64(instances))
}
