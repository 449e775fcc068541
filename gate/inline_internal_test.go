package gate

import "testing"

// solo counts a process's callers in line by job, and forgets a job once
// its last caller is done: a process that waited for many distinct jobs
// keeps none of them.
func TestLineSoloForgetsTheJob(t *testing.T) {
	q := &inLine{}
	alone, done := q.solo("k")
	if !alone {
		t.Fatal("the first caller of a job: not alone")
	}
	alone2, done2 := q.solo("k")
	if alone2 {
		t.Fatal("a second caller of the same job: alone")
	}
	done2()
	done()
	if len(q.jobs) != 0 {
		t.Fatalf("after every caller was done: %v kept, want none", q.jobs)
	}
	if alone, done := q.solo("k"); !alone {
		t.Fatal("the next caller of the job: not alone")
	} else {
		done()
	}
}
