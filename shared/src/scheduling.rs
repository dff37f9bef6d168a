//! Which due outbox events the dispatcher publishes next (issue 16, items 1 and 2;
//! docs/decisions.md, "Fair share"). Pure: the dispatcher reads the state
//! (`db::scheduler::read_state`), this plans, `db::scheduler::claim` claims the plan.
//!
//! Per queue, only `target - in_flight` more messages are published, where `target` is
//! `scheduling.in_flight_per_queue` or the live worker slots serving the queue when
//! more. Each of them goes, one at a time, to
//! - the bulk class while bulk holds less than its guaranteed share of `target`, else
//!   the interactive class first (either class when the other has nothing due);
//! - within the class, the tenant with the least occupancy per weight — its running
//!   plus in-flight jobs of the queue, divided by `share_weight` — among the tenants
//!   with due events below their running cap; ties go to the oldest head.
//!
//! The occupancy is the state a deficit counter would keep, read from the database, so
//! every dispatcher sees the same and nothing is lost when one restarts; and it is fair
//! on worker time, not on job counts: a tenant with slow jobs gets no more of the fleet
//! than one with quick ones.

use std::collections::HashMap;

use time::OffsetDateTime;
use uuid::Uuid;

/// An event's priority class, set at enqueue from the job's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Someone waits for it: an upload's analysis, a single re-analyze, a retry.
    Interactive,
    /// Nobody waits for it: bulk re-analyze and verify, scheduled scrubs.
    Bulk,
}

impl Priority {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Bulk => "bulk",
        }
    }

    /// The stored value; anything unknown is interactive (never starved either way).
    pub fn parse(value: &str) -> Self {
        match value {
            "bulk" => Self::Bulk,
            _ => Self::Interactive,
        }
    }

    /// The class of a request naming `count` documents: one is interactive (someone
    /// waits for that document), more is bulk.
    pub fn of_request(count: usize) -> Self {
        if count > 1 {
            Self::Bulk
        } else {
            Self::Interactive
        }
    }
}

/// The scheduler's settings (`[scheduling]`, plus the dispatcher's batch size).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub in_flight_per_queue: i64,
    pub bulk_share_percent: i64,
    /// Most events one round publishes, all queues together.
    pub batch_size: i64,
}

impl Limits {
    /// The limits `settings` name: every dispatcher plans with these.
    pub fn from_settings(settings: &crate::config::Settings) -> Self {
        Self {
            in_flight_per_queue: settings.scheduling.in_flight_per_queue,
            bulk_share_percent: settings.scheduling.bulk_share_percent,
            batch_size: settings.dispatcher.batch_size,
        }
    }
}

/// A (queue, class, tenant) with due events, not paused.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub queue: String,
    pub priority: Priority,
    pub tenant_id: Uuid,
    /// Its due events, counted up to the largest budget a round can give.
    pub due: i64,
    /// When its oldest due event became due.
    pub head_due_at: OffsetDateTime,
    pub weight: i64,
    /// Its running cap (`tenants.max_running_jobs` or the configured default).
    pub cap: i64,
}

/// Running and in-flight (published or being published, not yet claimed) jobs of one
/// tenant in one queue.
#[derive(Debug, Clone)]
pub struct Occupancy {
    pub queue: String,
    pub tenant_id: Uuid,
    pub running: i64,
    pub in_flight: i64,
    pub bulk_in_flight: i64,
}

/// What the database says before a round.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub candidates: Vec<Candidate>,
    pub occupancy: Vec<Occupancy>,
    /// Slots of live workers serving each queue.
    pub slots: HashMap<String, i64>,
}

/// One event to publish: the next due event of this (queue, class, tenant).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pick {
    pub queue: String,
    pub priority: Priority,
    pub tenant_id: Uuid,
}

/// True unless `picks` take every due event `state` counted, with no count cut at the
/// round's lookahead (which is never below the smaller of `in_flight_per_queue` and
/// `batch_size`). A round that leaves nothing due needs no second round at once: an event
/// committed after its read, or room freed by a finish, wakes the dispatchers with its
/// own NOTIFY.
pub fn leaves_due(state: &State, picks: &[Pick], limits: &Limits) -> bool {
    let uncut = limits.in_flight_per_queue.min(limits.batch_size);
    let due: i64 = state.candidates.iter().map(|c| c.due).sum();
    state.candidates.iter().any(|c| c.due >= uncut) || due > picks.len() as i64
}

/// The events to publish this round, in publication order.
pub fn plan(state: &State, limits: &Limits) -> Vec<Pick> {
    let mut in_flight: HashMap<&str, (i64, i64)> = HashMap::new();
    let mut occupancy: HashMap<(&str, Uuid), i64> = HashMap::new();
    let mut busy: HashMap<Uuid, i64> = HashMap::new();
    for row in &state.occupancy {
        let queue = in_flight.entry(row.queue.as_str()).or_default();
        queue.0 += row.in_flight;
        queue.1 += row.bulk_in_flight;
        *occupancy
            .entry((row.queue.as_str(), row.tenant_id))
            .or_default() += row.running + row.in_flight;
        *busy.entry(row.tenant_id).or_default() += row.running + row.in_flight;
    }
    let mut by_queue: Vec<(&str, Vec<Candidate>)> = Vec::new();
    for candidate in &state.candidates {
        match by_queue
            .iter_mut()
            .find(|(queue, _)| *queue == candidate.queue)
        {
            Some((_, list)) => list.push(candidate.clone()),
            None => by_queue.push((candidate.queue.as_str(), vec![candidate.clone()])),
        }
    }
    by_queue.sort_by(|a, b| a.0.cmp(b.0));

    let mut picks = Vec::new();
    let mut left = limits.batch_size;
    for (queue, mut candidates) in by_queue {
        let slots = state.slots.get(queue).copied().unwrap_or(0);
        let target = limits.in_flight_per_queue.max(slots);
        let (queue_in_flight, mut bulk_in_flight) = in_flight.get(queue).copied().unwrap_or((0, 0));
        let bulk_floor = (target * limits.bulk_share_percent + 99) / 100;
        let mut budget = (target - queue_in_flight).min(left);
        while budget > 0 {
            let order = if bulk_in_flight < bulk_floor {
                [Priority::Bulk, Priority::Interactive]
            } else {
                [Priority::Interactive, Priority::Bulk]
            };
            let chosen = order
                .iter()
                .find_map(|&priority| fairest(&candidates, priority, queue, &occupancy, &busy));
            let Some(index) = chosen else { break };
            let candidate = &mut candidates[index];
            candidate.due -= 1;
            *occupancy.entry((queue, candidate.tenant_id)).or_default() += 1;
            *busy.entry(candidate.tenant_id).or_default() += 1;
            if candidate.priority == Priority::Bulk {
                bulk_in_flight += 1;
            }
            picks.push(Pick {
                queue: queue.to_owned(),
                priority: candidate.priority,
                tenant_id: candidate.tenant_id,
            });
            budget -= 1;
            left -= 1;
        }
        if left <= 0 {
            break;
        }
    }
    picks
}

/// The index of the candidate of `priority` that gets the next event: due events left,
/// below its cap, least occupancy per weight, then the oldest head, then the lowest id
/// (so every dispatcher decides alike).
fn fairest(
    candidates: &[Candidate],
    priority: Priority,
    queue: &str,
    occupancy: &HashMap<(&str, Uuid), i64>,
    busy: &HashMap<Uuid, i64>,
) -> Option<usize> {
    let occupied = |c: &Candidate| occupancy.get(&(queue, c.tenant_id)).copied().unwrap_or(0);
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.priority == priority
                && c.due > 0
                && busy.get(&c.tenant_id).copied().unwrap_or(0) < c.cap
        })
        .min_by(|(_, a), (_, b)| {
            // a.occupancy / a.weight against b.occupancy / b.weight, without division.
            let left = i128::from(occupied(a)) * i128::from(b.weight.max(1));
            let right = i128::from(occupied(b)) * i128::from(a.weight.max(1));
            left.cmp(&right)
                .then(a.head_due_at.cmp(&b.head_due_at))
                .then(a.tenant_id.cmp(&b.tenant_id))
        })
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: &str = "q";

    fn limits(in_flight: i64) -> Limits {
        Limits {
            in_flight_per_queue: in_flight,
            bulk_share_percent: 20,
            batch_size: 1000,
        }
    }

    fn candidate(tenant: Uuid, priority: Priority, due: i64, weight: i64) -> Candidate {
        Candidate {
            queue: QUEUE.to_owned(),
            priority,
            tenant_id: tenant,
            due,
            head_due_at: OffsetDateTime::UNIX_EPOCH,
            weight,
            cap: 1000,
        }
    }

    fn count(picks: &[Pick], tenant: Uuid) -> usize {
        picks.iter().filter(|p| p.tenant_id == tenant).count()
    }

    #[test]
    fn a_round_that_takes_every_due_event_leaves_nothing_due() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let state = State {
            candidates: vec![
                candidate(a, Priority::Interactive, 2, 1),
                candidate(b, Priority::Bulk, 1, 1),
            ],
            ..State::default()
        };
        let limits = limits(40);
        let picks = plan(&state, &limits);
        assert_eq!(picks.len(), 3);
        assert!(!leaves_due(&state, &picks, &limits));
    }

    #[test]
    fn a_round_held_back_by_a_bound_or_a_cut_count_leaves_due_events() {
        let a = Uuid::now_v7();
        // The per-queue bound takes 5 of 8.
        let bounded = State {
            candidates: vec![candidate(a, Priority::Interactive, 8, 1)],
            ..State::default()
        };
        let picks = plan(&bounded, &limits(5));
        assert_eq!(picks.len(), 5);
        assert!(leaves_due(&bounded, &picks, &limits(5)));
        // A count at the lookahead may have been cut there: more may wait behind it,
        // even when the plan took all it saw.
        let cut = State {
            candidates: vec![candidate(a, Priority::Interactive, 40, 1)],
            ..State::default()
        };
        let picks = plan(&cut, &limits(40));
        assert_eq!(picks.len(), 40);
        assert!(leaves_due(&cut, &picks, &limits(40)));
    }

    #[test]
    fn weights_share_the_budget_in_proportion() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let state = State {
            candidates: vec![
                candidate(a, Priority::Interactive, 1000, 3),
                candidate(b, Priority::Interactive, 1000, 1),
            ],
            ..State::default()
        };
        let picks = plan(&state, &limits(40));
        assert_eq!((count(&picks, a), count(&picks, b)), (30, 10));
    }

    #[test]
    fn a_tenant_without_occupancy_goes_before_a_busy_one() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let state = State {
            candidates: vec![
                candidate(a, Priority::Interactive, 1000, 1),
                candidate(b, Priority::Interactive, 1, 1),
            ],
            occupancy: vec![Occupancy {
                queue: QUEUE.to_owned(),
                tenant_id: a,
                running: 1,
                in_flight: 4,
                bulk_in_flight: 0,
            }],
            ..State::default()
        };
        let picks = plan(&state, &limits(5));
        assert_eq!(picks.len(), 1, "the queue had room for one more");
        assert_eq!(picks[0].tenant_id, b);
    }

    #[test]
    fn bulk_keeps_its_share_under_interactive_load_and_interactive_goes_first() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let state = State {
            candidates: vec![
                candidate(a, Priority::Interactive, 1000, 1),
                candidate(b, Priority::Bulk, 1000, 1),
            ],
            ..State::default()
        };
        let picks = plan(&state, &limits(10));
        assert_eq!(picks.len(), 10);
        assert_eq!(count(&picks, b), 2, "20 % of 10 for bulk");
        // With bulk at its share, the next free place is interactive's.
        let state = State {
            occupancy: vec![Occupancy {
                queue: QUEUE.to_owned(),
                tenant_id: b,
                running: 0,
                in_flight: 2,
                bulk_in_flight: 2,
            }],
            ..state
        };
        let picks = plan(&state, &limits(3));
        assert_eq!(picks.len(), 1);
        assert_eq!(picks[0].priority, Priority::Interactive);
    }

    #[test]
    fn a_tenant_at_its_cap_gets_nothing_and_live_slots_raise_the_bound() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let mut capped = candidate(a, Priority::Interactive, 1000, 1);
        capped.cap = 2;
        let state = State {
            candidates: vec![capped, candidate(b, Priority::Interactive, 1000, 1)],
            occupancy: vec![Occupancy {
                queue: "other".to_owned(),
                tenant_id: a,
                running: 2,
                in_flight: 0,
                bulk_in_flight: 0,
            }],
            slots: HashMap::from([(QUEUE.to_owned(), 50)]),
        };
        let picks = plan(&state, &limits(4));
        assert_eq!(count(&picks, a), 0, "running in another queue counts");
        assert_eq!(count(&picks, b), 50, "50 live slots beat a bound of 4");
    }
}
