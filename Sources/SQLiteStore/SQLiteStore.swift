// SQLiteStore: a small SQLite wrapper and a group-commit writer thread, for the broker's page store and the
// device daemon's local store. The only module that imports CSQLite: no `sqlite3_*` type appears in its API.
//
// Why not GRDB: it pulls full Foundation and ICU into our static binaries (+35 s per release build), and we need
// exact control over which thread touches which connection (one writer thread per store, answers on the loop).
// What we need of SQLite is small: statements with bindings, transactions and savepoints, migrations by
// `user_version`, and batching many small writes into one fsync. No Foundation here either.
//
// Threading, in one line each:
// - `SQLiteConnection` and its statements are used by one thread at a time (opened with SQLITE_OPEN_NOMUTEX).
// - `SQLiteWriter` owns a connection on a thread of its own; loops submit jobs and get completions back on
//   their own thread, after the commit.
import CSQLite

/// `SQLITE_TRANSIENT` (SQLite copies the bound bytes before the bind call returns); the C macro does not import.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
