//! Waiting for the sockets (and stdin) and for the next deadline at once: an epoll instance,
//! level-triggered, whose wait takes the deadline as its timeout (epoll_pwait2(2), nanoseconds).
//!
//! Why not a timerfd, as cchost had: the deadline moves with every credit, and a timerfd costs a
//! timerfd_settime call per wake-up to re-arm and a read to clear, on top of the wait, three
//! system calls where one does, and a timer programmed even when packets are already waiting
//! (epoll_pwait2 arms none then). The wake-up is as exact: the kernel's slack for a wait is 0.1 %
//! of it (0.13 us for a 130 us credit gap) or the process's timer slack (1 ns, set in
//! [`Poller::new`]), whichever is more; the timeout is relative, so the wake-up can only be
//! later than asked by the time from reading the clock to entering the kernel (well under a us).
//! Kernels before 5.11, or a seccomp filter, refuse epoll_pwait2: the poller then falls back to
//! a timerfd in the same epoll set, re-armed only when the deadline moves.
//!
//! Why a spin before a deadline (`set_spin`): on the virtual machine cchost is developed on, a
//! timed sleep costs 17-29 us of the process's CPU (arming the deadline timer and halting are
//! exits to the hypervisor) and wakes 23-47 us late, whatever its length; a wake-up by another
//! CPU costs ~14 us (measured with a C loop of epoll_pwait2 and a pipe ping-pong, 2026-11-27).
//! A precise wait (for the network's deadlines: the run loop says which) whose deadline is
//! nearer than the spin margin polls with a zero timeout instead (~0.15 us a call, no timer, no
//! halt), and a longer one sleeps until the margin before its deadline and spins the rest: on
//! time, and for a short wait cheaper than the sleep; between polls it yields the CPU to anything
//! runnable. Off by default (cchost --spin-us 0). In one sitting (`ccemu bench transport --spin-us
//! 0 60`, 2026-11-28) a 60 us margin cut credit timer lateness at 100 Mbit/s from p50 29-31 us to
//! 1 us and p99 97-104 us to 58-60 us, for 1.06x ExpressPass's CPU per GB. It is off because the
//! experiments do not need it and it costs CPU the datapath may need: at their rates (credit gaps of
//! 500 us and more) a sleep's lateness is a few % of a gap, and the convergence experiment's port
//! lag FAILed in 2 of 3 runs with it (2 of 5 without: not conclusive either way).
//!
//! Why level-triggered: a socket is read one batch per wake-up (sockets.rs); what it still holds
//! makes the next wait return at once. So a flood of arrivals on one socket cannot hold off the
//! timers (credit pacing) or the other sockets, and no read is spent finding a socket empty.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::clock::{Clock, Timer};

/// The token of the fallback timerfd, which `tokens` never yields.
const TIMER: u64 = u64::MAX;

pub struct Poller {
    epoll: OwnedFd,
    events: Vec<libc::epoll_event>,
    ready: usize,
    /// Set when epoll_pwait2 is not available: a timerfd, and the deadline it is armed at.
    fallback: Option<(Timer, Option<Instant>)>,
    /// How long before a deadline a wait stops sleeping and spins (zero: it never spins).
    spin: Duration,
}

impl Poller {
    /// A poller for up to `capacity` ready descriptors per wait.
    pub fn new(capacity: usize) -> io::Result<Self> {
        // SAFETY: plain system calls; the epoll fd is owned from here on.
        let epoll = unsafe {
            // Wake-ups as exact as the kernel can: credits at 100 Mbit/s leave every ~130 us.
            libc::prctl(libc::PR_SET_TIMERSLACK, 1);
            let fd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            OwnedFd::from_raw_fd(fd)
        };
        let events = vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)];
        Ok(Self { epoll, events, ready: 0, fallback: None, spin: Duration::ZERO })
    }

    /// The same, waiting on a timerfd rather than epoll_pwait2's timeout (what a kernel
    /// without epoll_pwait2 gets).
    #[cfg(test)]
    pub fn with_timerfd(capacity: usize) -> io::Result<Self> {
        let mut poller = Self::new(capacity)?;
        poller.use_timerfd()?;
        Ok(poller)
    }

    fn use_timerfd(&mut self) -> io::Result<()> {
        let timer = Timer::new()?;
        self.add(timer.fd(), TIMER)?;
        self.fallback = Some((timer, None));
        Ok(())
    }

    /// Waits nearer than `spin` to their deadline poll without sleeping (the module's doc: why).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Watches `fd` for input (level-triggered), reported as `token` (not `u64::MAX`).
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: epoll_ctl reads the event it is given.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: EPOLL_CTL_DEL ignores the event (null is allowed since Linux 2.6.9).
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until a watched descriptor has input or `until` comes, whichever is first (at once
    /// if either is so already). A signal ends the wait early, with nothing ready. A `precise`
    /// wait sleeps until the spin margin before `until`, then spins; another sleeps to `until`.
    pub fn wait(&mut self, clock: &Clock, until: Instant, precise: bool) -> io::Result<()> {
        let spin = if precise { self.spin } else { Duration::ZERO };
        let sleep_until = until.checked_sub(spin).unwrap_or(until);
        if spin.is_zero() || sleep_until > Instant::now() {
            let slept = self.sleep(clock, sleep_until)?;
            if spin.is_zero() || self.tokens().next().is_some() || !slept {
                return Ok(());
            }
        }
        self.spin_until(until)
    }

    /// Polls with a zero timeout until input or `until`.
    fn spin_until(&mut self, until: Instant) -> io::Result<()> {
        let epoll = self.epoll.as_raw_fd();
        loop {
            let n = match wait_for_events(epoll, &mut self.events, 0) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => return Err(e),
            };
            if let Some((timer, armed)) = &mut self.fallback {
                // The fallback's timer, armed for the sleep before, may fire during the spin.
                if self.events[..n].iter().any(|event| event.u64 == TIMER) {
                    timer.clear();
                    *armed = None;
                }
            }
            self.ready = n;
            if self.tokens().next().is_some() || Instant::now() >= until {
                return Ok(());
            }
            // Another runnable process (a host's, the datapath's) gets the CPU first: a spin uses
            // only time nobody else wants, so on an oversubscribed machine it delays no one.
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
    }

    /// Sleeps until input or `until`; false if a signal ended the sleep.
    fn sleep(&mut self, clock: &Clock, until: Instant) -> io::Result<bool> {
        self.ready = 0;
        let (epoll, events) = (self.epoll.as_raw_fd(), &mut self.events[..]);
        let result = match &mut self.fallback {
            None => match wait_with_timeout(epoll, events, until) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    self.use_timerfd()?;
                    return self.sleep(clock, until);
                }
                result => result,
            },
            Some((timer, armed)) => {
                // Re-armed only when the deadline moved: a timerfd_settime call saved per
                // wake-up that leaves it where it was (the counters' 100 ms tick, say).
                if *armed != Some(until) {
                    timer.arm(clock, until)?;
                    *armed = Some(until);
                }
                let result = wait_for_events(epoll, events, -1);
                if let Ok(n) = result {
                    if events[..n].iter().any(|event| event.u64 == TIMER) {
                        timer.clear();
                        *armed = None; // fired: the next wait arms it again, whatever its deadline
                    }
                }
                result
            }
        };
        match result {
            Ok(n) => self.ready = n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(e),
        }
        Ok(true)
    }

    /// The tokens of the descriptors the last wait found ready.
    pub fn tokens(&self) -> impl Iterator<Item = u64> + '_ {
        self.events[..self.ready].iter().map(|event| event.u64).filter(|&token| token != TIMER)
    }

    /// Whether the poller waits on a timerfd (epoll_pwait2 refused, or asked for).
    #[cfg(test)]
    pub fn uses_timerfd(&self) -> bool {
        self.fallback.is_some()
    }
}

/// epoll_pwait2 until `until`: how many events it wrote into `events`.
fn wait_with_timeout(epoll: RawFd, events: &mut [libc::epoll_event], until: Instant) -> io::Result<usize> {
    let timeout = until.saturating_duration_since(Instant::now());
    let timeout = libc::timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: the kernel writes at most `events.len()` events into `events` and reads the
    // timespec; with no signal mask (null) the mask's size is ignored.
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epoll,
            events.as_mut_ptr(),
            events.len() as libc::c_int,
            &timeout as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// epoll_wait with a timeout in ms: -1 (none: the fallback's timerfd is among the descriptors)
/// or 0 (a poll, for the spin).
fn wait_for_events(epoll: RawFd, events: &mut [libc::epoll_event], timeout_ms: libc::c_int) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `events.len()` events into `events`.
    let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as libc::c_int, timeout_ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::time::Duration;

    use super::*;

    /// epoll_pwait2 and the timerfd fallback, each sleeping to the deadline and with a spin
    /// margin (1 ms: the 200 us wait spins only, the 3 ms one sleeps and then spins).
    fn pollers() -> Vec<Poller> {
        let spinning = |mut poller: Poller| {
            poller.set_spin(Duration::from_millis(1));
            poller
        };
        vec![
            Poller::new(4).expect("epoll"),
            Poller::with_timerfd(4).expect("epoll and a timerfd"),
            spinning(Poller::new(4).expect("epoll")),
            spinning(Poller::with_timerfd(4).expect("epoll and a timerfd")),
        ]
    }

    #[test]
    fn a_wait_with_nothing_ready_returns_at_its_deadline_not_before() {
        let clock = Clock::new(None);
        for mut poller in pollers() {
            for wait_us in [0, 200, 3000] {
                let until = Instant::now() + Duration::from_micros(wait_us);
                poller.wait(&clock, until, true).expect("waits");
                let now = Instant::now();
                assert!(now >= until, "woke {:?} early (timerfd: {})", until - now, poller.uses_timerfd());
                // How late a woken thread gets a CPU is the scheduler's (a shared 2-CPU machine can
                // keep it waiting for hundreds of ms): this bound only tells "woke at its deadline"
                // from "slept on" (no timer armed: the 10 s of a test's other waits, or forever).
                assert!(now - until < Duration::from_secs(5), "woke {:?} late", now - until);
                assert_eq!(poller.tokens().count(), 0, "nothing ready, and the timer is no token");
            }
        }
    }

    #[test]
    fn input_ends_a_wait_at_once_and_stays_ready_until_read() {
        let clock = Clock::new(None);
        for mut poller in pollers() {
            let (reader, mut writer) = io::pipe().expect("a pipe");
            poller.add(reader.as_fd().as_raw_fd(), 7).expect("watches");
            writer.write_all(b"x").expect("writes");
            for _ in 0..2 {
                let start = Instant::now();
                poller.wait(&clock, start + Duration::from_secs(10), true).expect("waits");
                assert!(start.elapsed() < Duration::from_secs(5), "did not wait for the deadline");
                assert_eq!(poller.tokens().collect::<Vec<_>>(), [7], "level-triggered: ready again, unread");
            }
            poller.remove(reader.as_fd().as_raw_fd()).expect("unwatches");
            poller.wait(&clock, Instant::now() + Duration::from_millis(1), true).expect("waits");
            assert_eq!(poller.tokens().count(), 0);
        }
    }
}
