//! The host's UDP sockets: one per path-id, bound to `base + path_id` on the host's address
//! (transport/wire-format.md: the fabric routes by the low 8 bits of the source port), with
//! ECN set per datagram through an IP_TOS control message and read back through IP_RECVTOS.
//!
//! Datagrams move in batches, a system call for many: [`Receiver`] reads up to [`BATCH`]
//! datagrams of a socket with one recvmmsg(2) (and no extra call to find it empty), and
//! [`PathSockets::send`] hands a run of datagrams of one socket to one sendmmsg(2). The
//! datagrams on the wire are the same, one by one, as separate calls would send. What this
//! saves is the calls' own cost and the per-call setup; the kernel's UDP path (~4-5 us a
//! datagram, send and receive, on the 2-core VM this was measured on) stays per datagram.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;

use cchost::{Ecn, HostId, Transmit};
use socket2::{Domain, Protocol, Socket, Type};

pub const PATHS: usize = 256;
/// Room for bursts of arriving packets while the process is not scheduled.
const RECEIVE_BUFFER_BYTES: usize = 8 << 20;
const SEND_BUFFER_BYTES: usize = 4 << 20;
/// Datagrams one recvmmsg or sendmmsg call moves at most: a window's burst of acks, or of data,
/// in one or two calls (a DCTCP receiver drains ~100 data packets per wake-up at 1 Gbit/s).
pub const BATCH: usize = 64;
/// Room for one received datagram. cchost's largest is a data packet, 1472 bytes at the
/// fabric's 1500-byte MTU (a nack is at most 1034); a longer one (not cchost's) arrives cut to
/// this, and the core counts it malformed as it would a foreign datagram.
pub const SLOT_BYTES: usize = 2048;
/// Control message room per datagram: one cmsghdr (16 bytes) and an int, padded; 64 bytes as
/// before, in case the kernel adds a message (it then sets MSG_CTRUNC and the TOS is still read).
const CONTROL_WORDS: usize = 8;

/// 10.(i >> 16).(i >> 8 & 255).(i & 255), as the fabric numbers hosts.
pub fn address_of(host: HostId) -> Ipv4Addr {
    Ipv4Addr::new(10, (host >> 16) as u8, (host >> 8) as u8, host as u8)
}

pub fn host_of(address: Ipv4Addr) -> Option<HostId> {
    let [ten, a, b, c] = address.octets();
    (ten == 10).then_some(u32::from(a) << 16 | u32::from(b) << 8 | u32::from(c))
}

pub struct PathSockets {
    pub sockets: Vec<Socket>,
    base: u16,
    sender: Sender,
}

/// What a datagram arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub from: SocketAddrV4,
    pub ecn: Ecn,
}

/// Creates a non-blocking UDP socket bound to `address`, asking for each datagram's TOS byte.
pub fn udp_socket(address: SocketAddrV4) -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    socket.set_recv_buffer_size(RECEIVE_BUFFER_BYTES)?;
    socket.set_send_buffer_size(SEND_BUFFER_BYTES)?;
    socket.set_recv_tos(true)?;
    socket.bind(&address.into()).map_err(|e| io::Error::new(e.kind(), format!("binding {address}: {e}")))?;
    Ok(socket)
}

impl PathSockets {
    pub fn bind(host: HostId, base: u16) -> io::Result<Self> {
        if !base.is_multiple_of(PATHS as u16) {
            return Err(io::Error::other(format!("port base {base} is not a multiple of {PATHS}")));
        }
        let address = address_of(host);
        let sockets = (0..PATHS)
            .map(|path| udp_socket(SocketAddrV4::new(address, base + path as u16)))
            .collect::<io::Result<_>>()?;
        Ok(Self { sockets, base, sender: Sender::new() })
    }

    /// Sends every datagram of `transmits`, in order, each from its path-id's socket to its
    /// destination with its ECN codepoint; returns how many could not be sent (a full send
    /// buffer, say: dropped, as a switch would). A run of consecutive datagrams of one path-id
    /// goes in one sendmmsg call.
    pub fn send(&mut self, transmits: &[Transmit]) -> u64 {
        let mut errors = 0;
        for run in transmits.chunk_by(|a, b| a.path_id == b.path_id) {
            let path_id = run[0].path_id;
            let fd = self.sockets[path_id as usize].as_raw_fd();
            let port = self.base + path_id as u16;
            let datagrams = run.iter().map(|t| (SocketAddrV4::new(address_of(t.dst), port), t.ecn, &t.payload[..]));
            errors += self.sender.send(fd, datagrams);
        }
        errors
    }
}

/// [`BATCH`] all-zero C structs: mmsghdr, iovec and sockaddr_in (null pointers, zero lengths).
fn zeroed_structs<T>() -> Vec<T> {
    // SAFETY: only used for plain C structs, of which all-zero bytes are a valid value.
    (0..BATCH).map(|_| unsafe { zeroed() }).collect()
}

/// Reusable sendmmsg(2) arguments: destinations, iovecs and control messages of one batch.
pub struct Sender {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_in>,
    controls: Vec<[u64; CONTROL_WORDS]>,
}

impl Sender {
    pub fn new() -> Self {
        Self {
            headers: zeroed_structs(),
            iovecs: zeroed_structs(),
            names: zeroed_structs(),
            controls: vec![[0; CONTROL_WORDS]; BATCH],
        }
    }

    /// Sends `datagrams` from socket `fd`, in order, [`BATCH`] per sendmmsg call; returns how
    /// many failed (each is skipped; the rest still go).
    pub fn send<'a>(&mut self, fd: RawFd, datagrams: impl Iterator<Item = (SocketAddrV4, Ecn, &'a [u8])>) -> u64 {
        let mut datagrams = datagrams.peekable();
        let mut errors = 0;
        while datagrams.peek().is_some() {
            let mut count = 0;
            for (i, (to, ecn, payload)) in datagrams.by_ref().take(BATCH).enumerate() {
                self.fill(i, to, ecn, payload);
                count = i + 1;
            }
            let mut sent = 0;
            while sent < count {
                // SAFETY: the first `count` headers point into `self`'s vectors (not resized
                // since `fill`) and at payloads borrowed for this call; sendmmsg reads them only.
                let n = unsafe { libc::sendmmsg(fd, self.headers[sent..count].as_mut_ptr(), (count - sent) as u32, 0) };
                if n < 0 {
                    // The datagram at `sent` failed (sendmmsg tells only when it is the first of
                    // the call); drop it and go on with the next, as one sendto each would.
                    if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    errors += 1;
                    sent += 1;
                } else {
                    sent += n as usize;
                }
            }
        }
        errors
    }

    /// Makes header `i` say: `payload` to `to` with `ecn`.
    fn fill(&mut self, i: usize, to: SocketAddrV4, ecn: Ecn, payload: &[u8]) {
        self.names[i] = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: to.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*to.ip()).to_be() },
            sin_zero: [0; 8],
        };
        self.iovecs[i] = libc::iovec { iov_base: payload.as_ptr() as *mut _, iov_len: payload.len() };
        let header = &mut self.headers[i].msg_hdr;
        header.msg_name = (&mut self.names[i] as *mut libc::sockaddr_in).cast();
        header.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        header.msg_iov = &mut self.iovecs[i];
        header.msg_iovlen = 1;
        header.msg_flags = 0;
        // The sockets' own TOS stays 0 (never set), so Not-ECT needs no control message; any
        // other codepoint rides on the datagram itself (an IP_TOS cmsg, which sets the same
        // TOS byte a setsockopt would, for this datagram only): no setsockopt call each time
        // a socket's codepoint changes, and datagrams of different codepoints share a batch.
        if ecn == Ecn::NotEct {
            header.msg_control = ptr::null_mut();
            header.msg_controllen = 0;
            return;
        }
        header.msg_control = self.controls[i].as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE of an int fits the control buffer (24 of 64 bytes); the header
        // is written within it, through the macros that align it.
        unsafe {
            header.msg_controllen = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
            let cmsg = libc::CMSG_FIRSTHDR(header);
            (*cmsg).cmsg_level = libc::IPPROTO_IP;
            (*cmsg).cmsg_type = libc::IP_TOS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
            ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), ecn as libc::c_int);
        }
    }
}

/// Reusable recvmmsg(2) buffers: up to [`BATCH`] datagrams of one socket per call, each with its
/// source and TOS byte.
pub struct Receiver {
    buffers: Vec<u8>,
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_in>,
    controls: Vec<[u64; CONTROL_WORDS]>,
    /// Datagrams the last call read.
    count: usize,
}

impl Receiver {
    pub fn new() -> Self {
        let mut receiver = Self {
            buffers: vec![0; BATCH * SLOT_BYTES],
            headers: zeroed_structs(),
            iovecs: zeroed_structs(),
            names: zeroed_structs(),
            controls: vec![[0; CONTROL_WORDS]; BATCH],
            count: 0,
        };
        // The vectors never grow, so pointers into them stay valid as the Receiver moves.
        for i in 0..BATCH {
            receiver.iovecs[i] =
                libc::iovec { iov_base: receiver.buffers[i * SLOT_BYTES..].as_mut_ptr().cast(), iov_len: SLOT_BYTES };
            let header = &mut receiver.headers[i].msg_hdr;
            header.msg_name = (&mut receiver.names[i] as *mut libc::sockaddr_in).cast();
            header.msg_iov = &mut receiver.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = receiver.controls[i].as_mut_ptr().cast();
        }
        receiver
    }

    /// Reads what socket `fd` holds, up to [`BATCH`] datagrams, without blocking; returns how
    /// many (0: none waiting). Fewer than [`BATCH`] means the socket was drained.
    pub fn receive(&mut self, fd: RawFd) -> io::Result<usize> {
        for header in &mut self.headers {
            // The kernel shortens these to what it wrote: give the whole room back.
            header.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            header.msg_hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>();
            header.msg_hdr.msg_flags = 0;
            header.msg_len = 0;
        }
        self.count = 0;
        // SAFETY: every header points at buffers of `self` of the lengths it gives, which
        // live through the call; recvmmsg writes only within them.
        let n =
            unsafe { libc::recvmmsg(fd, self.headers.as_mut_ptr(), BATCH as u32, libc::MSG_DONTWAIT, ptr::null_mut()) };
        if n < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(error),
            };
        }
        self.count = n as usize;
        Ok(self.count)
    }

    /// Datagram `i` of the last `receive`: what it arrived with, and its bytes.
    pub fn get(&self, i: usize) -> (Received, &[u8]) {
        assert!(i < self.count, "datagram {i} of {}", self.count);
        let header = &self.headers[i];
        let len = (header.msg_len as usize).min(SLOT_BYTES);
        let mut tos = 0u8;
        // SAFETY: the kernel wrote `msg_controllen` bytes of control messages into our buffer;
        // the macros walk them within that length.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&header.msg_hdr);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::IPPROTO_IP && (*cmsg).cmsg_type == libc::IP_TOS {
                    tos = *libc::CMSG_DATA(cmsg);
                }
                cmsg = libc::CMSG_NXTHDR(&header.msg_hdr, cmsg);
            }
        }
        let name = &self.names[i];
        let from = SocketAddrV4::new(Ipv4Addr::from(u32::from_be(name.sin_addr.s_addr)), u16::from_be(name.sin_port));
        let bytes = &self.buffers[i * SLOT_BYTES..i * SLOT_BYTES + len];
        (Received { len, from, ecn: Ecn::from_tos(tos) }, bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn host_numbers_and_addresses_map_both_ways() {
        assert_eq!(address_of(1), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(address_of(70_000), Ipv4Addr::new(10, 1, 17, 112));
        assert_eq!(host_of(address_of(70_000)), Some(70_000));
        assert_eq!(host_of(Ipv4Addr::LOCALHOST), None);
    }

    fn loopback_socket() -> (Socket, SocketAddrV4) {
        let socket = udp_socket(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).expect("a loopback socket");
        let address = socket.local_addr().expect("bound").as_socket_ipv4().expect("IPv4");
        (socket, address)
    }

    /// Reads `fd` until `want` datagrams have come (or 5 s pass), as (what, bytes) each.
    fn receive_all(receiver: &mut Receiver, fd: RawFd, want: usize) -> Vec<(Received, Vec<u8>)> {
        let mut got = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(5);
        while got.len() < want && Instant::now() < give_up {
            let n = receiver.receive(fd).expect("receives");
            assert!(n <= BATCH);
            got.extend((0..n).map(|i| receiver.get(i)).map(|(what, bytes)| (what, bytes.to_vec())));
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        got
    }

    #[test]
    fn a_batch_sent_with_one_call_arrives_in_order_with_each_datagrams_length_source_and_ecn() {
        let (a, from) = loopback_socket();
        let (b, to) = loopback_socket();
        let codepoints = [Ecn::NotEct, Ecn::Ect0, Ecn::Ce, Ecn::Ect1, Ecn::NotEct, Ecn::Ce];
        let payloads: Vec<Vec<u8>> = (0..codepoints.len()).map(|i| vec![i as u8; 18 + 290 * i]).collect();
        let datagrams = codepoints.iter().zip(&payloads).map(|(&ecn, payload)| (to, ecn, &payload[..]));
        assert_eq!(Sender::new().send(a.as_raw_fd(), datagrams), 0, "no errors");
        let got = receive_all(&mut Receiver::new(), b.as_raw_fd(), codepoints.len());
        assert_eq!(got.len(), codepoints.len());
        for ((what, bytes), (&ecn, payload)) in got.iter().zip(codepoints.iter().zip(&payloads)) {
            assert_eq!(*what, Received { len: payload.len(), from, ecn });
            assert_eq!(bytes, payload);
        }
    }

    #[test]
    fn more_datagrams_than_a_batch_go_out_in_several_calls_and_come_back_in_several_reads() {
        let (a, _) = loopback_socket();
        let (b, to) = loopback_socket();
        let count = 2 * BATCH + 5;
        let payloads: Vec<Vec<u8>> = (0..count).map(|i| (i as u32).to_be_bytes().repeat(100)).collect();
        let datagrams = payloads.iter().map(|payload| (to, Ecn::Ect0, &payload[..]));
        assert_eq!(Sender::new().send(a.as_raw_fd(), datagrams), 0);
        let mut receiver = Receiver::new();
        let got = receive_all(&mut receiver, b.as_raw_fd(), count);
        let bytes: Vec<Vec<u8>> = got.iter().map(|(_, bytes)| bytes.clone()).collect();
        assert_eq!(bytes, payloads, "every datagram, in order");
        assert!(got.iter().all(|(what, _)| what.ecn == Ecn::Ect0 && what.len == 400));
        assert_eq!(receiver.receive(b.as_raw_fd()).expect("an empty socket is no error"), 0);
    }

    #[test]
    fn a_datagram_longer_than_a_slot_arrives_cut_to_the_slot() {
        let (a, _) = loopback_socket();
        let (b, to) = loopback_socket();
        let long = vec![7u8; SLOT_BYTES + 100];
        assert_eq!(Sender::new().send(a.as_raw_fd(), [(to, Ecn::NotEct, &long[..])].into_iter()), 0);
        let got = receive_all(&mut Receiver::new(), b.as_raw_fd(), 1);
        assert_eq!((got[0].0.len, got[0].1.len()), (SLOT_BYTES, SLOT_BYTES));
    }

    #[test]
    fn a_datagram_that_cannot_be_sent_is_counted_and_the_rest_still_go() {
        let (a, _) = loopback_socket();
        let (b, to) = loopback_socket();
        // Too long for UDP (65507 bytes at most): EMSGSIZE, for that datagram alone.
        let (short, huge) = (vec![1u8; 10], vec![2u8; 70_000]);
        let datagrams = [(to, Ecn::NotEct, &short[..]), (to, Ecn::Ce, &huge[..]), (to, Ecn::Ce, &short[..])];
        assert_eq!(Sender::new().send(a.as_raw_fd(), datagrams.into_iter()), 1);
        let got = receive_all(&mut Receiver::new(), b.as_raw_fd(), 2);
        let ecns: Vec<Ecn> = got.iter().map(|(what, _)| what.ecn).collect();
        assert_eq!(ecns, [Ecn::NotEct, Ecn::Ce]);
    }
}
