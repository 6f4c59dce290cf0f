package durable

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
)

// fenceFS is the file system of one Pebble database the store opened (an
// incarnation). A database whose write failed is given up, not closed
// (Pebble cannot close it), and its goroutines may still run: once fenced,
// nothing it does changes a file, so that the next database opened on the
// same directory is the only writer there. Each write holds the fence's
// lock shared, so that fence waits for the writes under way: after it,
// none starts.
type fenceFS struct {
	vfs.FS
	mu     sync.RWMutex
	fenced bool
}

// errFenced is what a given-up database's writes get.
var errFenced = errors.New("durable: this database was given up after a failed write; it writes nothing more")

func (fs *fenceFS) enter() error {
	fs.mu.RLock()
	if fs.fenced {
		fs.mu.RUnlock()
		return errFenced
	}
	return nil
}

func (fs *fenceFS) exit() { fs.mu.RUnlock() }

// fence stops every write of the database, once those under way are done.
func (fs *fenceFS) fence() {
	fs.mu.Lock()
	fs.fenced = true
	fs.mu.Unlock()
}

func (fs *fenceFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil || f == nil {
		return f, err
	}
	return &fenceFile{File: f, fs: fs}, nil
}

func (fs *fenceFS) Create(name string) (vfs.File, error) {
	if err := fs.enter(); err != nil {
		return nil, err
	}
	defer fs.exit()
	return fs.wrap(fs.FS.Create(name))
}

func (fs *fenceFS) Link(oldname, newname string) error {
	if err := fs.enter(); err != nil {
		return err
	}
	defer fs.exit()
	return fs.FS.Link(oldname, newname)
}

func (fs *fenceFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs *fenceFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.enter(); err != nil {
		return nil, err
	}
	defer fs.exit()
	return fs.wrap(fs.FS.OpenReadWrite(name, opts...))
}

func (fs *fenceFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *fenceFS) Remove(name string) error {
	if err := fs.enter(); err != nil {
		return err
	}
	defer fs.exit()
	return fs.FS.Remove(name)
}

func (fs *fenceFS) RemoveAll(name string) error {
	if err := fs.enter(); err != nil {
		return err
	}
	defer fs.exit()
	return fs.FS.RemoveAll(name)
}

func (fs *fenceFS) Rename(oldname, newname string) error {
	if err := fs.enter(); err != nil {
		return err
	}
	defer fs.exit()
	return fs.FS.Rename(oldname, newname)
}

func (fs *fenceFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	if err := fs.enter(); err != nil {
		return nil, err
	}
	defer fs.exit()
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname))
}

func (fs *fenceFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.enter(); err != nil {
		return err
	}
	defer fs.exit()
	return fs.FS.MkdirAll(dir, perm)
}

// fenceFile is a file of a fenced database: its writes and syncs stop at
// the fence; reads go on.
type fenceFile struct {
	vfs.File
	fs *fenceFS
}

func (f *fenceFile) Write(p []byte) (int, error) {
	if err := f.fs.enter(); err != nil {
		return 0, err
	}
	defer f.fs.exit()
	return f.File.Write(p)
}

func (f *fenceFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.enter(); err != nil {
		return 0, err
	}
	defer f.fs.exit()
	return f.File.WriteAt(p, off)
}

func (f *fenceFile) Preallocate(off, n int64) error {
	if err := f.fs.enter(); err != nil {
		return err
	}
	defer f.fs.exit()
	return f.File.Preallocate(off, n)
}

func (f *fenceFile) Sync() error {
	if err := f.fs.enter(); err != nil {
		return err
	}
	defer f.fs.exit()
	return f.File.Sync()
}

func (f *fenceFile) SyncData() error {
	if err := f.fs.enter(); err != nil {
		return err
	}
	defer f.fs.exit()
	return f.File.SyncData()
}

func (f *fenceFile) SyncTo(n int64) (bool, error) {
	if err := f.fs.enter(); err != nil {
		return false, err
	}
	defer f.fs.exit()
	return f.File.SyncTo(n)
}

// dirLock holds the lock on the store's directory for the store's whole
// life, across the databases it opens there: Pebble takes the lock at
// each open and releases it at each close, and a database given up is
// never closed, so the lock is taken once, here, and each open gets a
// handle whose Close does nothing. release lets it go. Another process,
// or another Store in this one, still finds the directory locked.
type dirLock struct {
	vfs.FS
	mu   sync.Mutex
	held io.Closer
	name string
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func (l *dirLock) Lock(name string) (io.Closer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		if name == l.name {
			return nopCloser{}, nil
		}
		return l.FS.Lock(name)
	}
	c, err := l.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	l.held, l.name = c, name
	return nopCloser{}, nil
}

// release lets the lock go.
func (l *dirLock) release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		return nil
	}
	err := l.held.Close()
	l.held = nil
	return err
}
