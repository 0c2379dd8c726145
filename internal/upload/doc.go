// Package upload keeps and unpacks the packages that Ray clients upload: zip files of a
// job's working_dir (or py_modules), which a client PUTs to
// /api/packages/gcs/_ray_pkg_<hash>.zip before it submits a job that names them, and
// which the job later unpacks as its working folder.
//
// An upload comes from the network, so everything about it is checked before it touches
// the disk, and again while it does.
//
// # Names
//
// ValidName allows package names of the form Ray makes, "_ray_pkg_<hex>.zip": letters,
// digits, '_', '-' and '.', ending in ".zip", with no slash, no "..", no leading dot and at
// most 255 bytes; a name is a plain file name in the store's folder and nothing else.
//
// # Storing
//
// A Store keeps uploaded archives by name in one folder. Put reads the body to a private
// temporary file, refuses it as soon as it passes Limits.MaxArchiveBytes (ErrTooLarge),
// checks that it is a zip archive whose entries Extract would accept, syncs it and renames
// it into place; a failed or refused upload leaves nothing behind. A second Put of a name
// replaces the first atomically, as Ray's own store does.
//
// # Extracting
//
// Extract unpacks an archive into a new folder. It refuses, before it writes anything, an
// archive that is not a zip file, and entries that:
//
//   - have an absolute name, an empty, "." or ".." path element, or a backslash, so no
//     entry can point outside the destination (zip slip); the one exception is the
//     folder entry "./", the package's folder itself, which Ray's working_dir packager
//     writes when that folder is empty, and which names the destination (once at most);
//   - are anything but a regular file or a folder (symbolic links, devices, pipes);
//   - have a name that is not valid UTF-8 or holds a NUL byte;
//   - appear twice, or need a folder where the archive has a file;
//   - are encrypted or compressed with a method other than store or deflate;
//   - have a name longer than 4096 bytes or a path element longer than 255;
//   - unpack to more than Limits.MaxFiles files and folders (counting the folders that
//     names imply), or claim more than Limits.MaxTotalBytes.
//
// While it writes, it counts the bytes that actually come out of the archive, and stops
// at Limits.MaxTotalBytes whatever the headers claim, so a zip bomb with lying headers is
// stopped too; archive/zip also refuses an entry that holds more data than its header
// says, or whose checksum does not match. All writes go through an os.Root opened on the
// new folder, which cannot reach outside it even if a check above were wrong.
//
// Extract writes into a temporary sibling of the destination and renames it into place
// only when everything is written; on any error, nothing is left at the destination or
// beside it. Files get mode 0644, or 0755 when the archive marks them executable by their
// owner (scripts); folders get 0755; the umask applies. The unpacked files are not synced
// to disk: they are a copy of the stored archive, which is, so after a crash a caller
// should unpack again rather than trust an old folder.
//
// Extract keeps the archive's layout as it is, as Ray does for gcs:// packages (Ray removes
// a single top-level folder only from packages it downloads from remote URIs such as
// s3://). Ray's clients put a working_dir's contents at the top of its archive, and a
// py_modules module's folder as the single top-level folder of its archive; a caller that
// wants another layout moves the files itself.
package upload
