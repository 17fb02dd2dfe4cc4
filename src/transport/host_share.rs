//! The node's per-host budgets ([`crate::wire::host_budget`]): one per subscriber host,
//! shared by every link of the node's publications to it, and the waiting a link does on
//! its share.

use crate::wire::host_budget::{HostBudget, Traffic};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;
use tokio::sync::watch;

/// Hosts kept in the map before entries whose links all closed are swept out: the map is
/// bounded by the hosts with live links, plus this.
const SWEEP_AT: usize = 64;

/// A node's budgets, one per subscriber host (see [`crate::node::NodeOptions::max_rate_per_host`]).
#[derive(Debug, Default)]
pub(crate) struct HostBudgets {
    inner: Mutex<Budgets>,
}

#[derive(Debug, Default)]
struct Budgets {
    /// Bytes per second each host shares; `None`: no budgets.
    rate: Option<f64>,
    hosts: HashMap<IpAddr, Weak<Mutex<HostBudget>>>,
}

impl HostBudgets {
    fn inner(&self) -> std::sync::MutexGuard<'_, Budgets> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on, budgets of `rate` bytes per second each (`None`: none) for the links
    /// made from now on; links already made keep theirs.
    pub(crate) fn set_rate(&self, rate: Option<f64>) {
        let mut inner = self.inner();
        inner.rate = rate.filter(|rate| rate.is_finite() && *rate > 0.0);
        inner.hosts.clear();
    }

    /// The rate each host shares, bytes per second (`None`: no budgets).
    pub(crate) fn rate(&self) -> Option<f64> {
        self.inner().rate
    }

    /// The share of a link to `host` of a topic marked urgent or not (`None` when the node
    /// has no budgets): the host's budget, made when this is its first live link.
    /// `closed` turns true as the link closes.
    pub(crate) fn share(
        &self,
        host: IpAddr,
        urgent_topic: bool,
        closed: watch::Receiver<bool>,
    ) -> Option<HostShare> {
        let host = host.to_canonical();
        let mut inner = self.inner();
        let rate = inner.rate?;
        if inner.hosts.len() >= SWEEP_AT {
            inner.hosts.retain(|_, budget| budget.strong_count() > 0);
        }
        let budget = match inner.hosts.get(&host).and_then(Weak::upgrade) {
            Some(budget) => budget,
            None => {
                let budget = Arc::new(Mutex::new(HostBudget::new(rate)));
                inner.hosts.insert(host, Arc::downgrade(&budget));
                budget
            }
        };
        Some(HostShare {
            budget,
            urgent_topic,
            closed,
        })
    }

    #[cfg(test)]
    fn hosts(&self) -> usize {
        self.inner().hosts.len()
    }
}

/// One link's share of its host's budget.
#[derive(Debug, Clone)]
pub(crate) struct HostShare {
    budget: Arc<Mutex<HostBudget>>,
    urgent_topic: bool,
    /// True once the link closed: its waits end.
    closed: watch::Receiver<bool>,
}

impl HostShare {
    /// The class of a send of messages whose largest is `largest` bytes.
    pub(crate) fn traffic(&self, largest: usize) -> Traffic {
        Traffic::of_message(self.urgent_topic, largest)
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, HostBudget> {
        self.budget.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `traffic` may send at `now` (taking nothing: [`spend`](Self::spend) what
    /// is then sent).
    pub(crate) fn ready(&self, now: Instant, traffic: Traffic) -> bool {
        self.budget().ready(now, traffic).is_ok()
    }

    /// Takes `bytes` of `traffic` that was found [`ready`](Self::ready).
    pub(crate) fn spend(&self, bytes: usize, traffic: Traffic) {
        self.budget().spend(bytes, traffic);
    }

    /// How long a bulk send asked for at `now` would wait for the host's budget.
    pub(crate) fn behind(&self, now: Instant) -> std::time::Duration {
        self.budget().behind(now)
    }

    /// Reserves `bytes` of `traffic` and waits until they may leave: first come, first
    /// served among the host's bulk links, after any urgent traffic. `Err` (a broken pipe)
    /// if the link closed while it had to wait: a closed link sends what may go at once
    /// (an action server's last result as it shuts down) and gives up the rest, so that
    /// subscribers that come and go cannot pile up tasks that wait, each holding a socket.
    pub(crate) async fn take(&self, bytes: usize, traffic: Traffic) -> std::io::Result<()> {
        let mut reservation = self.budget().reserve(Instant::now(), bytes, traffic);
        let mut start = reservation.start;
        let mut closed = self.closed.clone();
        loop {
            if start > Instant::now() {
                tokio::select! {
                    _ = tokio::time::sleep_until(start.into()) => {}
                    _ = closed.wait_for(|closed| *closed) => {
                        return Err(std::io::ErrorKind::BrokenPipe.into());
                    }
                }
            }
            // Urgent traffic that came meanwhile goes first.
            let later = self.budget().overtaken(&mut reservation);
            match later {
                Some(later) => start = later,
                None => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link that never closes.
    fn open() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    #[test]
    fn links_to_one_host_share_one_budget_and_closed_ones_are_swept() {
        let budgets = HostBudgets::default();
        let host: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(
            budgets.share(host, false, open()).is_none(),
            "no rate, no budgets"
        );
        budgets.set_rate(Some(100_000.0));
        let a = budgets.share(host, false, open()).unwrap();
        // The same host written as an IPv4-mapped IPv6 address is the same host.
        let b = budgets
            .share("::ffff:10.0.0.1".parse().unwrap(), true, open())
            .unwrap();
        let now = Instant::now();
        a.spend(50_000, Traffic::Bulk);
        assert!(!b.ready(now, Traffic::Bulk), "b shares a's debt");
        assert!(b.ready(now, Traffic::Urgent), "urgent goes ahead of it");
        assert_eq!(b.traffic(1 << 20), Traffic::Urgent, "b's topic is urgent");
        assert_eq!(a.traffic(1 << 20), Traffic::Bulk);
        // Thousands of hosts whose links closed leave a bounded map.
        for i in 0..5000u32 {
            let host = IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i));
            drop(budgets.share(host, false, open()));
        }
        assert!(budgets.hosts() <= SWEEP_AT + 1, "{}", budgets.hosts());
        // A live host's budget survives the sweeps.
        let c = budgets.share(host, false, open()).unwrap();
        assert!(!c.ready(now, Traffic::Bulk), "still a's budget");
        // A new rate makes new budgets for the links made from then on.
        budgets.set_rate(Some(1e6));
        assert!(budgets
            .share(host, false, open())
            .unwrap()
            .ready(now, Traffic::Bulk));
        budgets.set_rate(None);
        assert!(budgets.share(host, false, open()).is_none());
    }

    /// A link that closes while it waits for its turn stops waiting at once (it would
    /// otherwise hold its task and socket until its turn, and subscribers that come and
    /// go could pile such links up); what may go at once still goes on a closed link.
    #[tokio::test]
    async fn closing_a_link_ends_its_wait() {
        let budgets = HostBudgets::default();
        budgets.set_rate(Some(1_000.0));
        let host: IpAddr = "10.0.0.2".parse().unwrap();
        let (closing, closed) = watch::channel(false);
        let share = budgets.share(host, false, closed).unwrap();
        share.take(100_000, Traffic::Bulk).await.unwrap();
        // 98.5 kB of debt at 1 kB/s: the next waits 98.5 s, unless the link closes.
        let waiting = tokio::spawn({
            let share = share.clone();
            async move { share.take(100_000, Traffic::Bulk).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "waits for its turn");
        closing.send_replace(true);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("the wait ends with the link")
            .unwrap();
        assert_eq!(ended.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
        // Urgent bytes within their allowance go at once, closed or not.
        share.take(100, Traffic::Urgent).await.unwrap();
    }
}
