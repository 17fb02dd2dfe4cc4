//! One advertised topic: the links to its subscribers, each fed the same serialized frame
//! through its own drop-oldest queue, so `publish` never waits for a slow subscriber.

use super::queue::DropOldest;
use super::{LinkStats, Protocol, HEARTBEAT};
use crate::wire::header::ConnectionHeader;
use crate::wire::udpros::{Fragmenter, Pacer, HEADER_LEN};
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// What a topic carries, as the handshake states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub topic: String,
    pub msg_type: String,
    pub md5sum: String,
    pub definition: String,
}

/// One subscriber's connection.
#[derive(Debug)]
pub struct SubscriberLink {
    /// The id getBusInfo and getBusStats report.
    pub id: u32,
    pub caller_id: String,
    pub protocol: Protocol,
    pub peer: SocketAddr,
    pub local_port: u16,
    pub stats: LinkStats,
    queue: DropOldest<Bytes>,
    closed: AtomicBool,
}

impl SubscriberLink {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.queue.close();
    }

    /// Frames dropped because this subscriber fell behind.
    pub fn drops(&self) -> u64 {
        self.queue.dropped()
    }
}

pub struct Publication {
    pub info: TopicInfo,
    pub latch: bool,
    queue_size: usize,
    node_name: String,
    links: Mutex<Vec<Arc<SubscriberLink>>>,
    latched: Mutex<Option<Bytes>>,
    messages: AtomicU64,
    link_ids: Arc<AtomicU32>,
}

impl std::fmt::Debug for Publication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publication")
            .field("topic", &self.info.topic)
            .finish()
    }
}

/// Datagram pacing toward a subscriber: roscpp's receive buffer is the kernel default
/// (about 200 kB), so bursts stay well under it; udpros subscribers size theirs for whole
/// messages.
fn pacer_for(udpros_peer: bool) -> Pacer {
    if udpros_peer {
        Pacer::new(1_500_000_000, 4 << 20)
    } else {
        Pacer::new(250_000_000, 96 << 10)
    }
}

impl Publication {
    pub fn new(
        info: TopicInfo,
        latch: bool,
        queue_size: usize,
        node_name: &str,
        link_ids: Arc<AtomicU32>,
    ) -> Publication {
        Publication {
            info,
            latch,
            queue_size: queue_size.max(1),
            node_name: node_name.to_string(),
            links: Mutex::new(Vec::new()),
            latched: Mutex::new(None),
            messages: AtomicU64::new(0),
            link_ids,
        }
    }

    fn links(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SubscriberLink>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands one frame (length prefix included) to every subscriber; never waits.
    pub fn publish_frame(&self, frame: Bytes) {
        if self.latch {
            *self.latched.lock().unwrap_or_else(|e| e.into_inner()) = Some(frame.clone());
        }
        self.messages.fetch_add(1, Ordering::Relaxed);
        let mut links = self.links();
        links.retain(|l| !l.is_closed());
        for link in links.iter() {
            link.queue.push(frame.clone());
        }
    }

    /// Like [`publish_frame`](Self::publish_frame), but first waits until every
    /// subscriber's queue has room, so nothing is dropped for a slow subscriber: the
    /// publisher goes at the pace of the slowest link instead.
    pub async fn publish_frame_when_room(&self, frame: Bytes) {
        for link in &self.subscriber_links() {
            link.queue.wait_for_room().await;
        }
        self.publish_frame(frame);
    }

    pub fn num_subscribers(&self) -> usize {
        self.links().iter().filter(|l| !l.is_closed()).count()
    }

    pub fn messages_sent(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }

    pub fn subscriber_links(&self) -> Vec<Arc<SubscriberLink>> {
        self.links()
            .iter()
            .filter(|l| !l.is_closed())
            .cloned()
            .collect()
    }

    /// The handshake's verdict on a subscriber's header: our reply header, or the text of
    /// the error, worded as roscpp words it.
    pub fn accept(&self, header: &ConnectionHeader) -> Result<ConnectionHeader, String> {
        let (Some(md5), Some(topic), Some(caller)) = (
            header.get("md5sum"),
            header.get("topic"),
            header.get("callerid"),
        ) else {
            return Err("Header from subscriber did not have the required elements: md5sum, topic, callerid".into());
        };
        if md5 != "*" && self.info.md5sum != "*" && md5 != self.info.md5sum {
            let their_type = header.get("type").unwrap_or("");
            return Err(format!(
                "Client [{caller}] wants topic {topic} to have datatype/md5sum [{their_type}/{md5}], but our version has [{}/{}]. Dropping connection.",
                self.info.msg_type, self.info.md5sum
            ));
        }
        Ok(ConnectionHeader::new()
            .with("callerid", self.node_name.as_str())
            .with("latching", if self.latch { "1" } else { "0" })
            .with("md5sum", self.info.md5sum.as_str())
            .with("message_definition", self.info.definition.as_str())
            .with("topic", self.info.topic.as_str())
            .with("type", self.info.msg_type.as_str()))
    }

    fn new_link(
        &self,
        caller_id: &str,
        protocol: Protocol,
        peer: SocketAddr,
        local_port: u16,
    ) -> Arc<SubscriberLink> {
        let link = Arc::new(SubscriberLink {
            id: self.link_ids.fetch_add(1, Ordering::Relaxed),
            caller_id: caller_id.to_string(),
            protocol,
            peer,
            local_port,
            stats: LinkStats::default(),
            queue: DropOldest::new(self.queue_size),
            closed: AtomicBool::new(false),
        });
        if let Some(frame) = self
            .latched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            link.queue.push(frame);
        }
        self.links().push(link.clone());
        link
    }

    /// Serves a TCP subscriber whose handshake succeeded (our reply already written).
    pub fn add_tcp_link(&self, stream: TcpStream, caller_id: &str, nodelay: bool) {
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let local_port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
        let _ = stream.set_nodelay(nodelay);
        super::set_keepalive(&stream);
        let link = self.new_link(caller_id, Protocol::Tcp, peer, local_port);
        tokio::spawn(tcp_link(link, stream));
    }

    /// Opens a UDP link to a subscriber (negotiated through requestTopic).
    pub fn add_udp_link(
        &self,
        socket: UdpSocket,
        caller_id: &str,
        connection_id: u32,
        max_datagram: usize,
        udpros_peer: bool,
    ) -> Result<Arc<SubscriberLink>, String> {
        let fragmenter = Fragmenter::new(connection_id, max_datagram).map_err(|e| e.to_string())?;
        let peer = socket.peer_addr().map_err(|e| e.to_string())?;
        let local_port = socket.local_addr().map(|a| a.port()).unwrap_or(0);
        let link = self.new_link(caller_id, Protocol::Udp, peer, local_port);
        tokio::spawn(udp_link(link.clone(), socket, fragmenter, udpros_peer));
        Ok(link)
    }

    /// Closes every link (udpros UDP peers are sent ERR).
    pub fn close(&self) {
        for link in self.links().drain(..) {
            link.close();
        }
    }
}

impl Drop for Publication {
    fn drop(&mut self) {
        self.close();
    }
}

async fn tcp_link(link: Arc<SubscriberLink>, stream: TcpStream) {
    let (mut reader, mut writer) = stream.into_split();
    // The subscriber sends nothing after its header: any read completing means it left.
    let watch = link.clone();
    let watcher = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
        watch.close();
    });
    let mut frames = Vec::new();
    let mut batch = Vec::new();
    while link.queue.pop_all(&mut frames).await.is_some() {
        // Several small frames go out in one write; large ones as they are.
        let total: usize = frames.iter().map(Bytes::len).sum();
        let result = if frames.len() > 1 && total <= 64 << 10 {
            batch.clear();
            frames.iter().for_each(|f| batch.extend_from_slice(f));
            writer.write_all(&batch).await
        } else {
            let mut result = Ok(());
            for frame in &frames {
                result = writer.write_all(frame).await;
                if result.is_err() {
                    break;
                }
            }
            result
        };
        frames
            .drain(..)
            .for_each(|f| link.stats.add_message(f.len()));
        if result.is_err() {
            break;
        }
    }
    link.close();
    watcher.abort();
}

async fn udp_link(
    link: Arc<SubscriberLink>,
    socket: UdpSocket,
    mut fragmenter: Fragmenter,
    udpros_peer: bool,
) {
    let mut pacer = pacer_for(udpros_peer);
    let mut frames = Vec::new();
    let mut datagram = Vec::with_capacity(fragmenter.max_datagram_size());
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sent = Instant::now();
    'serve: loop {
        tokio::select! {
            more = link.queue.pop_all(&mut frames) => {
                if more.is_none() {
                    break;
                }
                for frame in frames.drain(..) {
                    let Ok(fragments) = fragmenter.fragment(&frame) else {
                        link.stats.drops.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    for d in fragments {
                        let at = pacer.reserve(Instant::now(), d.len());
                        if at > Instant::now() {
                            tokio::time::sleep_until(at.into()).await;
                        }
                        datagram.clear();
                        datagram.extend_from_slice(&d.header);
                        datagram.extend_from_slice(&d.payload);
                        if let Err(e) = socket.send(&datagram).await {
                            // A subscriber gone: the kernel's port-unreachable surfaces here.
                            tracing::debug!("UDPROS link to {} closed: {e}", link.caller_id);
                            link.close();
                            break 'serve;
                        }
                    }
                    link.stats.add_message(frame.len());
                    last_sent = Instant::now();
                }
            }
            _ = heartbeat.tick(), if udpros_peer => {
                if last_sent.elapsed() >= HEARTBEAT && socket.send(&fragmenter.ping()).await.is_err() {
                    link.close();
                    break;
                }
            }
        }
    }
    if udpros_peer {
        let _ = socket.send(&fragmenter.err()[..HEADER_LEN]).await;
    }
    link.close();
}
