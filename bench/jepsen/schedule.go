package jepsen

import (
	"fmt"
	"math/rand/v2"
	"time"

	"switchyard/bench/harness"
)

// Schedule is a nemesis's program: faults, each held while the clients go
// on, then healed, and the cluster's recovery awaited before the next.
type Schedule struct {
	Name, About string
	// Run makes faults until the nemesis has made at least faults of
	// them (each fault counts: a partition, a kill, a wipe, an add; heals
	// and restarts do not).
	Run func(n *Nemesis, rng *rand.Rand, faults int) error
}

// Schedules are the suite's, each run by make jepsen with FullFaults
// faults and by CI with ShortFaults.
var Schedules = []*Schedule{
	{Name: "leader-isolated", About: "the leader cut off from both followers (its clients still reach it), healed after 2 s",
		Run: func(n *Nemesis, _ *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				l, err := n.Leader()
				if err != nil {
					return err
				}
				return holdThenHeal(n, 2*time.Second, n.Partition([]*harness.ClusterNode{l}, n.Others(l)))
			})
		}},
	{Name: "majority-minority", About: "a node chosen at random (the leader one time in two) cut off from the other two, clients on both sides, healed after 2 s",
		Run: func(n *Nemesis, rng *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				m, err := leaderOrNot(n, rng)
				if err != nil {
					return err
				}
				return holdThenHeal(n, 2*time.Second, n.Partition([]*harness.ClusterNode{m}, n.Others(m)))
			})
		}},
	{Name: "bridge", About: "two nodes cut from each other, both still reaching the third (the leader as the bridge one time in two, as an end otherwise), healed after 3 s",
		Run: func(n *Nemesis, rng *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				l, err := n.Leader()
				if err != nil {
					return err
				}
				ends := n.Others(l)
				if rng.IntN(2) == 0 { // the leader is an end
					ends = []*harness.ClusterNode{l, ends[rng.IntN(len(ends))]}
				}
				return holdThenHeal(n, 3*time.Second, n.Partition(ends[:1], ends[1:2]))
			})
		}},
	{Name: "leader-oneway", About: "everything the leader sends to the followers dropped, what they send it passing, healed after 2 s",
		Run: func(n *Nemesis, _ *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				l, err := n.Leader()
				if err != nil {
					return err
				}
				return holdThenHeal(n, 2*time.Second, n.OneWay(l, n.Others(l)...))
			})
		}},
	{Name: "loss", About: "20% of the packets on every link dropped (between the nodes, and between the clients and each node), healed after 2 s",
		Run: func(n *Nemesis, _ *rand.Rand, faults int) error {
			return cycles(n, faults, func() error { return holdThenHeal(n, 2*time.Second, n.LossAll(0.2)) })
		}},
	{Name: "pause", About: "a node (the leader one time in two) stopped with SIGSTOP for 2 s, then continued",
		Run: func(n *Nemesis, rng *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				m, err := leaderOrNot(n, rng)
				if err != nil {
					return err
				}
				return holdThenHeal(n, 2*time.Second, n.Pause(m))
			})
		}},
	{Name: "kill-all", About: "kill -9 of every node at once, restarted half a second later",
		Run: func(n *Nemesis, _ *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				nodes := n.Nodes()
				if err := n.Kill(nodes...); err != nil {
					return err
				}
				n.Hold(500 * time.Millisecond)
				if err := n.Restart(nodes...); err != nil {
					return err
				}
				n.AwaitRecovery()
				return nil
			})
		}},
	{Name: "wipe-partition", About: "a follower cut off (from the leader alone, or from both other nodes), killed, its data directory wiped, restarted while cut off, then healed",
		Run: func(n *Nemesis, rng *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				l, err := n.Leader()
				if err != nil {
					return err
				}
				fs := n.Others(l)
				f := fs[rng.IntN(len(fs))]
				if rng.IntN(2) == 0 {
					// Alone, where it hears from nobody.
					err = n.Partition([]*harness.ClusterNode{f}, n.Others(f))
				} else {
					// With the other follower, the leader alone: the two
					// elect one, the wiped one voting.
					err = n.Partition([]*harness.ClusterNode{l}, fs)
				}
				if err != nil {
					return err
				}
				if err := n.Kill(f); err != nil {
					return err
				}
				if err := n.Wipe(f); err != nil {
					return err
				}
				if err := n.Restart(f); err != nil {
					return err
				}
				return holdThenHeal(n, 2*time.Second, nil)
			})
		}},
	{Name: "membership", About: "a node (the leader one time in two) cut off from the other two; a fourth node added, then removed, during the cut; healed",
		Run: func(n *Nemesis, rng *rand.Rand, faults int) error {
			return cycles(n, faults, func() error {
				m, err := leaderOrNot(n, rng)
				if err != nil {
					return err
				}
				if err := n.Partition([]*harness.ClusterNode{m}, n.Others(m)); err != nil {
					return err
				}
				x, err := n.Add("n4")
				if err != nil {
					return err
				}
				n.Hold(time.Second)
				if err := n.Remove(x); err != nil {
					return err
				}
				return holdThenHeal(n, 0, nil)
			})
		}},
}

// Fault counts: every schedule makes at least FullFaults in make jepsen,
// and ShortFaults in CI.
const (
	FullFaults  = 20
	ShortFaults = 3
)

// ScheduleNamed is the schedule of that name, nil if none.
func ScheduleNamed(name string) *Schedule {
	for _, s := range Schedules {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// cycles runs cycle until the nemesis has made faults faults.
func cycles(n *Nemesis, faults int, cycle func() error) error {
	for k := 1; n.Faults() < faults; k++ {
		if err := n.ctx.Err(); err != nil {
			return err
		}
		if err := cycle(); err != nil {
			return fmt.Errorf("cycle %d: %w", k, err)
		}
	}
	return nil
}

// holdThenHeal holds the fault just made (err is its error) for d, heals
// and awaits the recovery.
func holdThenHeal(n *Nemesis, d time.Duration, err error) error {
	if err != nil {
		return err
	}
	n.Hold(d)
	if err := n.Heal(); err != nil {
		return err
	}
	n.AwaitRecovery()
	return nil
}

// leaderOrNot is the leader one time in two, another node otherwise.
func leaderOrNot(n *Nemesis, rng *rand.Rand) (*harness.ClusterNode, error) {
	l, err := n.Leader()
	if err != nil || rng.IntN(2) == 0 {
		return l, err
	}
	o := n.Others(l)
	return o[rng.IntN(len(o))], nil
}
