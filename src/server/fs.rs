//! Files that hold secrets or the embedded store: readable by this user only.

use std::io::Write;
use std::path::Path;

/// Creates `dir` (and its parents) if missing, and makes it 0700.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    restrict(dir, 0o700)
}

/// Writes `contents` to a new or truncated file made 0600 before anything is
/// written to it.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    // The mode applies only to a file this call created: an older file is
    // narrowed here.
    restrict(path, 0o600)?;
    file.write_all(contents.as_bytes())
}

/// Sets `path`'s permission bits (on Unix; elsewhere, nothing).
pub fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_files_and_dirs_are_for_their_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        create_private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let file = dir.join("secret");
        std::fs::write(&file, "old").unwrap();
        write_private(&file, "new").unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }
}
