//! The user a call runs as, and its key permissions: for keys the server
//! did not check itself because the command never declared them (the keys
//! `RL.OVERRIDE LIST` finds by SCAN).

use super::{Call, OwnedName};
use redis_module::raw;
use std::os::raw::c_int;

/// An ACL user, checked key by key with the server's own rules (key
/// patterns, `%R~`/`%W~`, selectors); released on drop.
pub struct User {
    raw: *mut raw::RedisModuleUser,
}

/// Whose permissions a call's undeclared keys are checked against.
pub enum Caller {
    /// A client with no user: the primary's link, AOF loading, or another
    /// module's `RM_Call` made without `C`. The server lets these read
    /// every key, so they are not filtered.
    Unrestricted,
    /// A user (a client's, or a script's caller's).
    User(User),
    /// The call's user no longer exists (deleted while the call ran):
    /// it may read nothing.
    Gone,
}

impl Call<'_> {
    /// Who this call runs as.
    ///
    /// `RM_GetCurrentUserName` dereferences the client's user, which is
    /// null for exactly the unrestricted clients above, and no API says
    /// whether it is. `RM_Call` with `C` (run as the context's user)
    /// refuses such a client with ENOTSUP before it even looks the command
    /// up; so an `AUTH` without arguments, which every server then refuses
    /// for its arity and never runs (no reply, no stats, no ACL log),
    /// asks the question safely on every supported server.
    pub fn caller(self) -> Caller {
        if !self.has_user() {
            return Caller::Unrestricted;
        }
        // SAFETY: the context is the running command's and its client has
        // a user (checked above); the name is freed below.
        let user = unsafe {
            let (Some(name_of), Some(by_name), Some(free)) = (
                raw::RedisModule_GetCurrentUserName,
                raw::RedisModule_GetModuleUserFromUserName,
                raw::RedisModule_FreeString,
            ) else {
                return Caller::Gone;
            };
            let name = name_of(self.ctx.raw());
            if name.is_null() {
                return Caller::Gone;
            }
            let user = by_name(name);
            free(self.ctx.raw(), name);
            user
        };
        if user.is_null() {
            Caller::Gone
        } else {
            Caller::User(User { raw: user })
        }
    }

    /// False when the call's client has no user (see `caller`).
    fn has_user(self) -> bool {
        // SAFETY: the context is live; "C" takes no arguments, so the
        // variadic list is empty; a reply, if any, is freed.
        unsafe {
            let Some(call) = raw::RedisModule_Call else {
                return false;
            };
            let reply = call(self.ctx.raw(), c"AUTH".as_ptr(), c"C".as_ptr());
            if !reply.is_null() {
                if let Some(free) = raw::RedisModule_FreeCallReply {
                    free(reply);
                }
                return true;
            }
        }
        std::io::Error::last_os_error().raw_os_error() != Some(ENOTSUP)
    }
}

/// Linux's errno for "not supported", which `RM_Call` sets for a client
/// without a user.
const ENOTSUP: c_int = 95;

impl Caller {
    /// Whether the caller may read `name`: the server's check for a key a
    /// command declares with read access.
    pub fn may_read(&self, name: &OwnedName) -> bool {
        match self {
            Caller::Unrestricted => true,
            Caller::Gone => false,
            Caller::User(user) => user.may_read(name),
        }
    }
}

impl User {
    fn may_read(&self, name: &OwnedName) -> bool {
        let access = raw::REDISMODULE_CMD_KEY_ACCESS as c_int;
        // SAFETY: the user is live until drop; the name is a string this
        // module created and still owns.
        unsafe {
            raw::RedisModule_ACLCheckKeyPermissions.is_some_and(|check| {
                check(self.raw, name.raw, access) == raw::REDISMODULE_OK as c_int
            })
        }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // SAFETY: obtained from RM_GetModuleUserFromUserName, freed once.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeModuleUser {
                free(self.raw);
            }
        }
    }
}
