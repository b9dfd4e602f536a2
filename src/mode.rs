//! The `rl.mode` module config: `on`, `off` or `monitor`, settable at load
//! (`--loadmodule librl.so mode monitor`) and at run time (`CONFIG SET
//! rl.mode monitor`): the gradual roll-out of application-kit's single Lua
//! script.

use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{enum_configuration, RedisError};
use std::sync::atomic::{AtomicI32, Ordering};

enum_configuration! {
    // Variant names are the config's values, hence lower case.
    #[allow(non_camel_case_types)]
    #[derive(Debug, PartialEq, Eq, Copy)]
    pub enum Mode {
        on = 0,
        off = 1,
        monitor = 2,
    }
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::on => "on",
            Mode::off => "off",
            Mode::monitor => "monitor",
        }
    }
}

/// The current mode, read on every call without a lock.
pub struct ModeCell(AtomicI32);

pub static MODE: ModeCell = ModeCell(AtomicI32::new(Mode::on as i32));

impl ModeCell {
    pub fn current(&self) -> Mode {
        Mode::try_from(self.0.load(Ordering::Relaxed)).unwrap_or(Mode::on)
    }
}

impl ConfigurationValue<Mode> for ModeCell {
    fn get(&self, _ctx: &ConfigurationContext) -> Mode {
        self.current()
    }

    fn set(&self, _ctx: &ConfigurationContext, val: Mode) -> Result<(), RedisError> {
        self.0.store(val as i32, Ordering::Relaxed);
        Ok(())
    }
}
