//! The host's UDP sockets: one per path-id, bound to `base + path_id` on the host's address
//! (transport/wire-format.md: the fabric routes by the low 8 bits of the source port), with
//! ECN set per packet through IP_TOS and read back through IP_RECVTOS.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

use cchost::{Ecn, HostId};
use socket2::{Domain, Protocol, Socket, Type};

pub const PATHS: usize = 256;
/// Room for bursts of arriving packets while the process is not scheduled.
const RECEIVE_BUFFER_BYTES: usize = 8 << 20;
const SEND_BUFFER_BYTES: usize = 4 << 20;

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
    tos: Vec<u8>,
    base: u16,
}

pub struct Received {
    pub len: usize,
    pub from: SocketAddrV4,
    pub ecn: Ecn,
}

impl PathSockets {
    pub fn bind(host: HostId, base: u16) -> io::Result<Self> {
        if !base.is_multiple_of(PATHS as u16) {
            return Err(io::Error::other(format!("port base {base} is not a multiple of {PATHS}")));
        }
        let address = address_of(host);
        let sockets = (0..PATHS)
            .map(|path| {
                let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
                socket.set_nonblocking(true)?;
                socket.set_recv_buffer_size(RECEIVE_BUFFER_BYTES)?;
                socket.set_send_buffer_size(SEND_BUFFER_BYTES)?;
                socket.set_recv_tos(true)?;
                let port = base + path as u16;
                socket
                    .bind(&SocketAddrV4::new(address, port).into())
                    .map_err(|e| io::Error::new(e.kind(), format!("binding {address}:{port}: {e}")))?;
                Ok(socket)
            })
            .collect::<io::Result<_>>()?;
        Ok(Self { sockets, tos: vec![0; PATHS], base })
    }

    pub fn send(&mut self, path_id: u8, dst: HostId, ecn: Ecn, payload: &[u8]) -> io::Result<usize> {
        let path = path_id as usize;
        if self.tos[path] != ecn as u8 {
            self.sockets[path].set_tos(ecn as u32)?;
            self.tos[path] = ecn as u8;
        }
        let to = SocketAddrV4::new(address_of(dst), self.base + path_id as u16);
        self.sockets[path].send_to(payload, &to.into())
    }

    /// One datagram from the socket of `path`, with the ECN bits it arrived with.
    pub fn receive(&self, path: usize, buffer: &mut [u8]) -> io::Result<Received> {
        let fd = self.sockets[path].as_raw_fd();
        // SAFETY: recvmsg(2) writes at most the lengths given into buffers that live
        // through the call; the control messages are read within `control`'s bounds.
        unsafe {
            let mut from: libc::sockaddr_in = zeroed();
            let mut iov = libc::iovec { iov_base: buffer.as_mut_ptr().cast(), iov_len: buffer.len() };
            let mut control = [0u64; 8];
            let mut msg: libc::msghdr = zeroed();
            msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
            msg.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = size_of::<[u64; 8]>();
            let len = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
            if len < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut tos = 0u8;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::IPPROTO_IP && (*cmsg).cmsg_type == libc::IP_TOS {
                    tos = *libc::CMSG_DATA(cmsg);
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            let ecn = Ecn::from_tos(tos);
            let from =
                SocketAddrV4::new(Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)), u16::from_be(from.sin_port));
            Ok(Received { len: len as usize, from, ecn })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_numbers_and_addresses_map_both_ways() {
        assert_eq!(address_of(1), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(address_of(70_000), Ipv4Addr::new(10, 1, 17, 112));
        assert_eq!(host_of(address_of(70_000)), Some(70_000));
        assert_eq!(host_of(Ipv4Addr::LOCALHOST), None);
    }
}
