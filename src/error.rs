//! Every error a command can reply, with its user-facing text.

use crate::request::ArgError;
use crate::state::layout::DecodeError;
use redis_module::RedisError;
use std::fmt;

#[derive(Debug, PartialEq, Eq)]
pub enum RlError {
    Arg(ArgError),
    /// The key holds a value this command does not own; `expected` names
    /// what it would have accepted.
    WrongType {
        expected: &'static str,
    },
    /// A value carrying our marker that fails validation: written by a
    /// newer librl, or tampered with.
    BadState(DecodeError),
    /// Something that cannot happen did: a panic caught at the handler
    /// boundary, or a server reply of an unexpected shape. Says what, for
    /// the server log; the client sees a generic message.
    Internal(&'static str),
    /// Used memory is above `maxmemory` and the call would add to the
    /// dataset (a new key, a log rebuilt larger): refused, nothing written.
    OutOfMemory,
    /// A waiting call whose key this node no longer serves (its slot
    /// moved while it waited): nothing taken; sent again, it reaches the
    /// key's node.
    SlotMoved,
}

/// The classes of error `INFO rl` counts (`rl_errors_<class>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// A malformed call: a bad or unknown argument, a repeated option, a
    /// key named twice (`ERR`).
    Argument,
    WrongType,
    /// Refused above `maxmemory` (`OOM`).
    OutOfMemory,
    /// A value written by a newer librl.
    NewerVersion,
    /// A librl value that fails validation.
    Corrupt,
    /// A bug caught at the panic boundary.
    Internal,
    /// A waiting call whose key's slot moved (`TRYAGAIN`).
    SlotMoved,
}

impl RlError {
    pub fn class(&self) -> ErrorClass {
        match self {
            RlError::Arg(_) => ErrorClass::Argument,
            RlError::WrongType { .. } => ErrorClass::WrongType,
            RlError::OutOfMemory => ErrorClass::OutOfMemory,
            RlError::BadState(DecodeError::UnsupportedVersion(_)) => ErrorClass::NewerVersion,
            RlError::BadState(_) => ErrorClass::Corrupt,
            RlError::Internal(_) => ErrorClass::Internal,
            RlError::SlotMoved => ErrorClass::SlotMoved,
        }
    }
}

impl fmt::Display for RlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlError::Arg(e) => e.fmt(f),
            RlError::WrongType { expected } => write!(
                f,
                "WRONGTYPE Operation against a key holding the wrong kind of value \
                 (expected {expected} or no key)"
            ),
            RlError::BadState(DecodeError::UnsupportedVersion(v)) => write!(
                f,
                "ERR key holds a librl value of encoding version {v}, \
                 which this librl does not know; upgrade the module"
            ),
            RlError::BadState(_) => write!(f, "ERR key holds a corrupt librl value"),
            // The server's own text for its refused writes, so clients
            // and alerts that know it need nothing new.
            RlError::OutOfMemory => {
                write!(f, "OOM command not allowed when used memory > 'maxmemory'.")
            }
            RlError::Internal(_) => write!(
                f,
                "ERR internal error in librl, nothing was changed (see the server log)"
            ),
            // TRYAGAIN, which cluster clients retry: sent again, the call
            // is redirected to the key's node as any other.
            RlError::SlotMoved => write!(
                f,
                "TRYAGAIN the key's slot moved to another node while this call waited; \
                 nothing was taken, send it again"
            ),
        }
    }
}

impl From<ArgError> for RlError {
    fn from(e: ArgError) -> Self {
        RlError::Arg(e)
    }
}

/// A fixed-size state is checked when decoded: deciding on it cannot fail.
impl From<std::convert::Infallible> for RlError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// An exact log is checked as it is read: an entry that disagrees with its
/// header is a corrupt value.
impl From<librl_core::sliding::CorruptLog> for RlError {
    fn from(_: librl_core::sliding::CorruptLog) -> Self {
        RlError::BadState(DecodeError::Corrupt)
    }
}

/// Leases are checked as they are read, as the exact log is.
impl From<librl_core::concurrent::CorruptLeases> for RlError {
    fn from(_: librl_core::concurrent::CorruptLeases) -> Self {
        RlError::BadState(DecodeError::Corrupt)
    }
}

impl From<RlError> for RedisError {
    fn from(e: RlError) -> Self {
        RedisError::String(e.to_string())
    }
}
