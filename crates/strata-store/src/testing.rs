//! A small file system of a test's own, for the fault tests that fill a disk or make it
//! read-only: a tmpfs of a given size mounted on a fresh temporary folder (root only; the
//! tests that use it are `#[ignore]`d and CI runs them), grown or remounted read-only on
//! demand, unmounted when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; see the module's doc.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` on a new folder under the system's temporary folder.
    pub fn mount(bytes: u64) -> Result<SmallDisk, String> {
        let base = std::env::temp_dir();
        let dir = (0u32..)
            .map(|i| base.join(format!("strata-small-disk-{}-{i}", std::process::id())))
            .find(|d| std::fs::create_dir(d).is_ok())
            .ok_or("no folder for the small disk")?;
        mount(&["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"], &dir)?;
        Ok(SmallDisk { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Gives the disk `bytes` in all, keeping what it holds: space returns.
    pub fn resize(&self, bytes: u64) -> Result<(), String> {
        mount(&["-o", &format!("remount,size={bytes}")], &self.dir)
    }

    /// Remounts the disk read-only (`writable = false`) or read-write.
    pub fn set_writable(&self, writable: bool) -> Result<(), String> {
        mount(&["-o", if writable { "remount,rw" } else { "remount,ro" }], &self.dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily, so that a file a failed test left open cannot keep the mount.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn mount(args: &[&str], dir: &Path) -> Result<(), String> {
    let out = Command::new("mount")
        .args(args)
        .arg(dir)
        .output()
        .map_err(|e| format!("running mount: {e} (the small-disk tests need root)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "mount {} {}: {} (the small-disk tests need root)",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
