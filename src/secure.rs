//! Secure links' settings: the graph's key, read from a key file nobody else may read,
//! the [`Policy`] toward peers and the [`Mode`] of sealed datagrams. What they do on the
//! wire is [`crate::wire::secure`]'s.
//!
//! A graph (or a fleet) shares one key. `udpros key new FILE` makes one, readable by its
//! owner only; each node is given the file's path, never the key itself, so the key
//! appears in no command line, parameter, log or `getBusInfo`:
//!
//! - `UDPROS_KEY_FILE=FILE` names it for every node started in that environment;
//! - `UDPROS_SECURITY=off|prefer|require` sets the policy (`prefer` when a key is named,
//!   `off` when none is);
//! - `UDPROS_SECURE_MODE=encrypt|auth` sets what sealing does to payloads (`encrypt`);
//! - a node's command line overrides the first three: `__key_file:=FILE`,
//!   `__security:=require`, `__secure_mode:=auth` ([`SecurityArgs`]), as `__master:=`
//!   overrides `ROS_MASTER_URI`;
//! - `UDPROS_SECURE_CIPHER=aes256gcm|chacha20poly1305` overrides the cipher this node
//!   would rather use (by default AES-256-GCM where the CPU has AES instructions,
//!   ChaCha20-Poly1305 elsewhere; a link takes AES only when both ends would).
//!
//! Per-node key pairs with an allowed-keys file were weighed and left out: a robot's
//! nodes are deployed together by one operator, who would copy the same allowed-keys file
//! everywhere anyway, and MAVLink signing (the other link an ROV has) is a shared key too.
//! One key file is one thing to deploy and to rotate.

pub use crate::wire::secure::{Cipher, GraphKey, KeyError, KeyId, Mode, Policy, NONCE_LEN};

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The environment variable naming the key file.
pub const KEY_FILE_VAR: &str = "UDPROS_KEY_FILE";
/// The environment variable holding the policy.
pub const POLICY_VAR: &str = "UDPROS_SECURITY";
/// The environment variable holding the mode.
pub const MODE_VAR: &str = "UDPROS_SECURE_MODE";
/// The environment variable overriding the cipher this node would rather use.
pub const CIPHER_VAR: &str = "UDPROS_SECURE_CIPHER";

/// A key file is one line of hex and a comment: anything much longer is no key file
/// (and is not read into memory whole).
const MAX_KEY_FILE: u64 = 64 << 10;

/// How a node secures its links.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// Toward peers: plain, secure where possible, or secure only.
    pub policy: Policy,
    /// What sealing does to payloads.
    pub mode: Mode,
    /// The graph's key (needed unless the policy is [`Policy::Off`]).
    pub key: Option<Arc<GraphKey>>,
    /// The cipher this node would rather use; `None`: this host's
    /// ([`Cipher::of_this_host`]).
    pub cipher: Option<Cipher>,
}

/// What a node's command line says of security (ROS special arguments, read by
/// [`NodeArgs`](crate::node::args::NodeArgs)): the key file's path, never the key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityArgs {
    /// `__key_file:=FILE`, over [`KEY_FILE_VAR`].
    pub key_file: Option<PathBuf>,
    /// `__security:=off|prefer|require`, over [`POLICY_VAR`].
    pub policy: Option<String>,
    /// `__secure_mode:=encrypt|auth`, over [`MODE_VAR`].
    pub mode: Option<String>,
}

/// Why a key file could not be used.
#[derive(Debug)]
pub enum KeyFileError {
    /// It could not be read or written.
    Io(PathBuf, std::io::Error),
    /// Others than its owner may read or write it (its permission bits).
    OpenToOthers(PathBuf, u32),
    /// It is larger than any key file.
    TooLarge(PathBuf, u64),
    /// Its text holds no key.
    NotAKey(PathBuf, KeyError),
    /// It exists already: a new key never replaces one.
    Exists(PathBuf),
    /// The OS gave no random bytes.
    NoRandomness(String),
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFileError::Io(path, e) => write!(f, "key file {}: {e}", path.display()),
            KeyFileError::OpenToOthers(path, mode) => write!(
                f,
                "key file {} may be read by others (mode {mode:o}): chmod 600 it",
                path.display()
            ),
            KeyFileError::TooLarge(path, len) => write!(
                f,
                "key file {} is {len} bytes: not a key file",
                path.display()
            ),
            KeyFileError::NotAKey(path, e) => write!(f, "key file {}: {e}", path.display()),
            KeyFileError::Exists(path) => write!(
                f,
                "{} exists: a new key never replaces a file (remove it first if you mean to)",
                path.display()
            ),
            KeyFileError::NoRandomness(e) => write!(f, "no random bytes from the OS: {e}"),
        }
    }
}

impl std::error::Error for KeyFileError {}

/// Why a node's security settings cannot be used.
#[derive(Debug)]
pub enum SecurityError {
    /// The key file.
    KeyFile(KeyFileError),
    /// A policy that is none of `off`, `prefer`, `require`.
    Policy(String),
    /// A mode that is neither `encrypt` nor `auth`.
    Mode(String),
    /// The cipher is not one.
    Cipher(String),
    /// A policy other than `off` with no key.
    NoKey(Policy),
}

impl fmt::Display for SecurityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecurityError::KeyFile(e) => e.fmt(f),
            SecurityError::Policy(e) | SecurityError::Mode(e) | SecurityError::Cipher(e) => {
                f.write_str(e)
            }
            SecurityError::NoKey(policy) => write!(
                f,
                "security policy {policy} needs the graph's key ({KEY_FILE_VAR}=FILE; udpros key new FILE makes one)"
            ),
        }
    }
}

impl std::error::Error for SecurityError {}

impl From<KeyFileError> for SecurityError {
    fn from(e: KeyFileError) -> SecurityError {
        SecurityError::KeyFile(e)
    }
}

impl Security {
    /// Security from a key file, a policy and a mode as a user writes them (the
    /// environment, a node's parameters, a command line): the policy is `prefer` when a
    /// key file is given and `off` when none is, unless said; the mode `encrypt`.
    pub fn from_settings(
        key_file: Option<&Path>,
        policy: Option<&str>,
        mode: Option<&str>,
    ) -> Result<Security, SecurityError> {
        let key = key_file.map(read_key_file).transpose()?.map(Arc::new);
        let policy = match policy {
            Some(text) => text.parse().map_err(SecurityError::Policy)?,
            None if key.is_some() => Policy::Prefer,
            None => Policy::Off,
        };
        let mode = match mode {
            Some(text) => text.parse().map_err(SecurityError::Mode)?,
            None => Mode::default(),
        };
        if policy != Policy::Off && key.is_none() {
            return Err(SecurityError::NoKey(policy));
        }
        Ok(Security {
            policy,
            mode,
            key,
            cipher: None,
        })
    }

    /// Security from [`KEY_FILE_VAR`], [`POLICY_VAR`], [`MODE_VAR`] and [`CIPHER_VAR`]
    /// (empty counts as unset).
    pub fn from_env() -> Result<Security, SecurityError> {
        Security::from_args_and_env(&SecurityArgs::default())
    }

    /// Security from a node's command line (`args`) over the environment
    /// ([`Security::from_env`]'s variables): what the command line says wins.
    pub fn from_args_and_env(args: &SecurityArgs) -> Result<Security, SecurityError> {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        let key_file = args
            .key_file
            .clone()
            .or_else(|| var(KEY_FILE_VAR).map(PathBuf::from));
        let policy = args.policy.clone().or_else(|| var(POLICY_VAR));
        let mode = args.mode.clone().or_else(|| var(MODE_VAR));
        let cipher = var(CIPHER_VAR)
            .map(|text| text.parse().map_err(SecurityError::Cipher))
            .transpose()?;
        let security =
            Security::from_settings(key_file.as_deref(), policy.as_deref(), mode.as_deref())?;
        Ok(Security { cipher, ..security })
    }

    /// A fresh nonce for one end of a link when the policy uses the key; with security
    /// off none is needed (nor drawn: link setup makes no syscall for it).
    pub fn link_nonce(&self) -> Result<[u8; NONCE_LEN], KeyFileError> {
        match self.active_key() {
            Some(_) => new_nonce(),
            None => Ok([0; NONCE_LEN]),
        }
    }

    /// The key, when the policy uses one.
    pub fn active_key(&self) -> Option<&GraphKey> {
        match self.policy {
            Policy::Off => None,
            Policy::Prefer | Policy::Require => self.key.as_deref(),
        }
    }

    /// This node's side of a link's handshake.
    pub(crate) fn side(&self) -> handshake::Side<'_> {
        handshake::Side {
            policy: self.policy,
            key: self.active_key(),
            mode: self.mode,
            cipher: self.cipher.unwrap_or_else(Cipher::of_this_host),
        }
    }

    /// A publisher's (or a service's) side of a handshake: how the link with the peer
    /// whose header is `offer` goes, `context` naming the link. Under `require` a plain
    /// peer is refused, with the reason to tell it.
    pub(crate) fn settle_offer(
        &self,
        offer: &crate::wire::header::ConnectionHeader,
        context: &[u8],
    ) -> Result<Settling, SettleError> {
        let nonce = self.link_nonce().map_err(SettleError::Random)?;
        let (settled, peer_nonce) =
            handshake::settle(self.side(), offer, context, &nonce).map_err(SettleError::Refused)?;
        let link = match settled {
            handshake::Settled::Secure(link) => Some(link),
            handshake::Settled::Plain => None,
        };
        Ok(Settling {
            key: link.as_ref().and(self.key.clone()),
            link,
            nonce,
            peer_nonce,
        })
    }
}

use crate::wire::secure::handshake;

/// Why a publisher could not settle a link's security.
#[derive(Debug)]
pub(crate) enum SettleError {
    /// The peer's offer is refused (plain under `require`, another key, a bad proof).
    Refused(handshake::Refused),
    /// No nonce could be drawn.
    Random(KeyFileError),
}

impl fmt::Display for SettleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettleError::Refused(refused) => write!(f, "secure link refused: {refused}"),
            SettleError::Random(e) => e.fmt(f),
        }
    }
}

/// A publisher's handshake once settled: what its answer adds, and the link's keys.
#[derive(Debug)]
pub(crate) struct Settling {
    link: Option<crate::wire::secure::LinkSecurity>,
    key: Option<Arc<GraphKey>>,
    nonce: [u8; NONCE_LEN],
    peer_nonce: Option<[u8; NONCE_LEN]>,
}

impl Settling {
    /// The secure link's mode and keys; `None`: a plain link.
    pub(crate) fn link(&self) -> Option<&crate::wire::secure::LinkSecurity> {
        self.link.as_ref()
    }

    /// Adds the answer's security fields to `answer` (none for a plain link).
    pub(crate) fn add_fields(&self, answer: &mut crate::wire::header::ConnectionHeader) {
        if let (Some(link), Some(key)) = (&self.link, &self.key) {
            for (field, value) in handshake::answer_fields(key, link, &self.nonce) {
                answer.insert(field, value);
            }
        }
    }

    /// Signs `answer` once every field is in: nothing of it can change on the way.
    pub(crate) fn sign(&self, answer: &mut crate::wire::header::ConnectionHeader) {
        if let (Some(_), Some(key)) = (&self.link, &self.key) {
            use crate::wire::secure::proof;
            proof::sign(
                key,
                proof::Role::Publisher,
                answer,
                self.peer_nonce.as_ref(),
            );
        }
    }
}

/// The key in the file at `path`, which only its owner may read or write (as ssh asks
/// of a private key).
pub fn read_key_file(path: &Path) -> Result<GraphKey, KeyFileError> {
    let io = |e| KeyFileError::Io(path.to_path_buf(), e);
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    open_to_owner_only(path, &meta)?;
    if meta.len() > MAX_KEY_FILE {
        return Err(KeyFileError::TooLarge(path.to_path_buf(), meta.len()));
    }
    let mut text = String::new();
    file.take(MAX_KEY_FILE)
        .read_to_string(&mut text)
        .map_err(io)?;
    GraphKey::parse(&text).map_err(|e| KeyFileError::NotAKey(path.to_path_buf(), e))
}

#[cfg(unix)]
fn open_to_owner_only(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyFileError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    match mode & 0o077 {
        0 => Ok(()),
        _ => Err(KeyFileError::OpenToOthers(path.to_path_buf(), mode)),
    }
}

#[cfg(not(unix))]
fn open_to_owner_only(_: &Path, _: &std::fs::Metadata) -> Result<(), KeyFileError> {
    Ok(())
}

/// A new key from the OS's random source.
pub fn new_key() -> Result<GraphKey, KeyFileError> {
    let mut bytes = [0u8; crate::wire::secure::KEY_LEN];
    getrandom::fill(&mut bytes).map_err(|e| KeyFileError::NoRandomness(e.to_string()))?;
    Ok(GraphKey::from_bytes(bytes))
}

/// A fresh nonce for one end of a link.
pub fn new_nonce() -> Result<[u8; NONCE_LEN], KeyFileError> {
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|e| KeyFileError::NoRandomness(e.to_string()))?;
    Ok(nonce)
}

/// Writes `key` to a new file at `path`, readable and writable by its owner only. A file
/// already there is never replaced.
pub fn write_new_key_file(path: &Path, key: &GraphKey) -> Result<(), KeyFileError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => KeyFileError::Exists(path.to_path_buf()),
        _ => KeyFileError::Io(path.to_path_buf(), e),
    })?;
    let written = file
        .write_all(key.file_text().as_bytes())
        .and_then(|()| file.sync_all());
    written.map_err(|e| KeyFileError::Io(path.to_path_buf(), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("udpros-secure-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_new_key_file_is_the_owners_only_and_reads_back() {
        let dir = dir("new");
        let path = dir.join("graph.key");
        let key = new_key().unwrap();
        write_new_key_file(&path, &key).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_key_file(&path).unwrap(), key);
        assert_ne!(new_key().unwrap(), key, "keys are random");
        // Never replaced: the second write fails and the first key is still there.
        let other = new_key().unwrap();
        assert!(matches!(
            write_new_key_file(&path, &other),
            Err(KeyFileError::Exists(_))
        ));
        assert_eq!(read_key_file(&path).unwrap(), key);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_key_file_others_may_read_or_that_is_no_key_is_refused() {
        let dir = dir("refused");
        let path = dir.join("graph.key");
        write_new_key_file(&path, &new_key().unwrap()).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = read_key_file(&path);
            assert!(
                matches!(refused, Err(KeyFileError::OpenToOthers(_, m)) if m == mode),
                "{mode:o}: {refused:?}"
            );
            assert!(refused.unwrap_err().to_string().contains("chmod 600"));
        }
        // A large file is refused by its size, without reading it.
        let big = dir.join("big.key");
        std::fs::write(&big, vec![b'#'; 16 << 20]).unwrap();
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read_key_file(&big),
            Err(KeyFileError::TooLarge(_, _))
        ));
        let text = dir.join("text.key");
        std::fs::write(&text, "not a key\n").unwrap();
        std::fs::set_permissions(&text, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read_key_file(&text),
            Err(KeyFileError::NotAKey(_, KeyError::NoKeyLine))
        ));
        assert!(matches!(
            read_key_file(&dir.join("none")),
            Err(KeyFileError::Io(..))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What a node's command line says wins over the environment (whatever this test's
    /// environment holds: every setting is given).
    #[test]
    fn the_command_line_overrides_the_environment() {
        let dir = dir("args");
        let path = dir.join("graph.key");
        write_new_key_file(&path, &new_key().unwrap()).unwrap();
        let args = SecurityArgs {
            key_file: Some(path.clone()),
            policy: Some("require".into()),
            mode: Some("auth".into()),
        };
        let security = Security::from_args_and_env(&args).unwrap();
        assert_eq!(
            (security.policy, security.mode),
            (Policy::Require, Mode::Authenticate)
        );
        assert_eq!(
            security.active_key().map(|k| k.id()),
            Some(read_key_file(&path).unwrap().id())
        );
        let wrong = SecurityArgs {
            policy: Some("strict".into()),
            ..args
        };
        assert!(matches!(
            Security::from_args_and_env(&wrong),
            Err(SecurityError::Policy(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_settings_default_to_prefer_with_a_key_and_off_without() {
        let dir = dir("settings");
        let path = dir.join("graph.key");
        write_new_key_file(&path, &new_key().unwrap()).unwrap();
        let with_key = Security::from_settings(Some(&path), None, None).unwrap();
        assert_eq!(
            (with_key.policy, with_key.mode),
            (Policy::Prefer, Mode::Encrypt)
        );
        assert!(with_key.active_key().is_some());
        let off = Security::from_settings(None, None, None).unwrap();
        assert_eq!(off.policy, Policy::Off);
        assert!(off.active_key().is_none());
        let auth = Security::from_settings(Some(&path), Some("require"), Some("auth")).unwrap();
        assert_eq!(
            (auth.policy, auth.mode),
            (Policy::Require, Mode::Authenticate)
        );
        let off_with_key = Security::from_settings(Some(&path), Some("off"), None).unwrap();
        assert!(off_with_key.active_key().is_none(), "off uses no key");
        assert!(matches!(
            Security::from_settings(None, Some("require"), None),
            Err(SecurityError::NoKey(Policy::Require))
        ));
        assert!(matches!(
            Security::from_settings(Some(&path), Some("strict"), None),
            Err(SecurityError::Policy(_))
        ));
        assert!(matches!(
            Security::from_settings(Some(&path), None, Some("none")),
            Err(SecurityError::Mode(_))
        ));
        // The key never shows in a Debug of the settings.
        let key = read_key_file(&path).unwrap();
        let shown = format!("{with_key:?}");
        assert!(!shown.contains(&key.file_text().lines().last().unwrap()[14..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
