package main

import "math/rand/v2"

// planKeys returns the key number of each of n calls: distinct keys numbered
// 0..distinct-1, each once, and n-distinct duplicates each repeating one of
// them, all in random order — the plan emitter bench follows too.
func planKeys(n int, duplicates float64, seed uint64) (plan []int, distinct int) {
	if n <= 0 {
		return nil, 0
	}
	distinct = max(1, n-int(float64(n)*duplicates+0.5))
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plan = make([]int, n)
	for i := range plan {
		if i < distinct {
			plan[i] = i
		} else {
			plan[i] = r.IntN(distinct)
		}
	}
	r.Shuffle(n, func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return plan, distinct
}
