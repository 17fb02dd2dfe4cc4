//! rosbag play's keys on a terminal: space pauses and resumes, `s` steps. Standard input
//! is put in non-canonical mode without echo (so each key arrives as it is pressed) and
//! restored when playing ends.

/// A key that means something to the player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    /// Space: pause or resume.
    Toggle,
    /// `s`: publish the next message while paused.
    Step,
}

/// The keys pressed, from a thread that reads standard input.
pub(super) struct Keys {
    keys: tokio::sync::mpsc::Receiver<Key>,
    saved: libc::termios,
}

impl Keys {
    /// Takes the terminal's keys; `None` when standard input is not a terminal.
    pub(super) fn start() -> Option<Keys> {
        // SAFETY: isatty, tcgetattr and tcsetattr read and write only the termios given,
        // which lives here; fd 0 is this process's standard input.
        let saved = unsafe {
            if libc::isatty(0) != 1 {
                return None;
            }
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                return None;
            }
            saved
        };
        let (sender, keys) = tokio::sync::mpsc::channel(16);
        std::thread::Builder::new()
            .name("udpros-play-keys".into())
            .spawn(move || {
                use std::io::Read;
                let mut byte = [0u8; 1];
                while let Ok(1) = std::io::stdin().read(&mut byte) {
                    let key = match byte[0] {
                        b' ' => Key::Toggle,
                        b's' | b'S' => Key::Step,
                        _ => continue,
                    };
                    if sender.blocking_send(key).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Keys { keys, saved })
    }

    /// The next key pressed (pending forever once standard input has closed).
    pub(super) async fn next(&mut self) -> Key {
        match self.keys.recv().await {
            Some(key) => key,
            None => std::future::pending().await,
        }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: restores the settings read at the start onto the same descriptor.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}
