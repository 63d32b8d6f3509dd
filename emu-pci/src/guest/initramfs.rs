//! A newc cpio archive (the initramfs format the kernel unpacks), written
//! from a base directory tree plus files the harness adds.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// An initramfs being assembled in memory.
#[derive(Default)]
pub struct Initramfs {
    buf: Vec<u8>,
    ino: u32,
    dirs: std::collections::BTreeSet<String>,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;

impl Initramfs {
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let name = name.trim_start_matches('/');
        let fields = [
            self.ino,
            mode,
            0,
            0,
            if mode & S_IFDIR == S_IFDIR { 2 } else { 1 },
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// Adds a directory and its missing parents.
    pub fn dir(&mut self, path: &str) {
        let path = path.trim_matches('/');
        if path.is_empty() || self.dirs.contains(path) {
            return;
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        self.dirs.insert(path.to_string());
        self.entry(path, S_IFDIR | 0o755, &[]);
    }

    fn parent(&mut self, path: &str) {
        if let Some((parent, _)) = path.trim_matches('/').rsplit_once('/') {
            self.dir(parent);
        }
    }

    /// Adds a regular file.
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.parent(path);
        self.entry(path, S_IFREG | (mode & 0o7777), data);
    }

    /// Adds a symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.parent(path);
        self.entry(path, S_IFLNK | 0o777, target.as_bytes());
    }

    /// Adds the tree under `root` at `/` (directories, files with their
    /// permission bits, symlinks).
    pub fn tree(&mut self, root: &Path) -> io::Result<()> {
        self.tree_at(root, root)
    }

    fn tree_at(&mut self, root: &Path, dir: &Path) -> io::Result<()> {
        let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned();
            if rel.starts_with(".net-mana") {
                continue;
            }
            let md = fs::symlink_metadata(&p)?;
            if md.file_type().is_symlink() {
                let t = fs::read_link(&p)?;
                self.symlink(&rel, &t.to_string_lossy());
            } else if md.is_dir() {
                self.dir(&rel);
                self.tree_at(root, &p)?;
            } else {
                let data = fs::read(&p)?;
                self.file(&rel, md.permissions().mode() | (md.mode() & 0o111), &data);
            }
        }
        Ok(())
    }

    /// Finishes the archive.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        while !self.buf.len().is_multiple_of(512) {
            self.buf.push(0);
        }
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut i = Initramfs::new();
        i.file("bin/x", 0o755, b"abc");
        let b = i.finish();
        // "bin" directory first, then the file, then the trailer.
        assert_eq!(&b[..6], b"070701");
        let name_at = 110;
        assert_eq!(&b[name_at..name_at + 4], b"bin\0");
        let second = 112 + 4; // header + "bin\0" padded to 4 (110+4=114 -> 116)
        assert_eq!(&b[second..second + 6], b"070701");
        // mode of the file: 0100755
        assert_eq!(&b[second + 14..second + 22], b"000081ed");
        // size 3
        assert_eq!(&b[second + 54..second + 62], b"00000003");
        assert_eq!(b.len() % 512, 0);
        assert!(b.windows(10).any(|w| w == b"TRAILER!!!"));
    }
}
