import SQLiteStore

extension PageStore {
  /// Brings `connection`'s schema up to date: SQLite by `PRAGMA user_version` (`migrations`), PostgreSQL by its
  /// `schema_version` table (`postgresMigrations`), under an advisory lock so that brokers opening one store at
  /// once migrate it once.
  static func migrate(_ connection: any StoreConnection) throws {
    switch connection.engine {
    case .sqlite:
      guard let sqlite = connection as? SQLiteConnection else {
        preconditionFailure("a connection of engine sqlite is an SQLiteConnection")
      }
      _ = try SQLiteMigrator(migrations).migrate(sqlite)
    case .postgres:
      // The key is arbitrary but fixed: "pagesync" in ASCII.
      try VersionTableMigrator(
        postgresMigrations, lockSQL: "SELECT pg_advisory_xact_lock(7017280452245743464)"
      )
      .migrate(connection)
    }
  }

  /// The broker store's schema, one migration per shipped version. Never edit a migration that has shipped: add
  /// the next one.
  ///
  /// Every last-writer-wins field keeps its stamp beside it (`*_stamp`: `LWWStamp.sortKey`, which sorts as the
  /// stamps do). `page.last_updated` is the sequence of the last batch that changed the page (for a database,
  /// also the last one that changed its rows in view). `change_log` says which fields of a page changed at
  /// which sequence; a delta is the current value of every field changed since a time, and `meta.log_floor` is
  /// the sequence below which the log was pruned (older times get a snapshot).
  static let migrations: [SQLiteMigration] = [
    SQLiteMigration(
      version: 1, name: "pages, blocks, views, clients, change log",
      sql: """
        CREATE TABLE meta (
          key TEXT PRIMARY KEY,
          value TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE page (
          id TEXT PRIMARY KEY,
          workspace_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('page', 'database')),
          parent_id TEXT,
          parent_stamp TEXT NOT NULL,
          title TEXT NOT NULL,
          title_stamp TEXT NOT NULL,
          deleted INTEGER NOT NULL DEFAULT 0,
          deleted_stamp TEXT NOT NULL,
          created_seq INTEGER NOT NULL,
          last_updated INTEGER NOT NULL,
          updated_at_ms INTEGER NOT NULL
        );
        CREATE INDEX page_parent ON page (parent_id);
        CREATE INDEX page_workspace_updated ON page (workspace_id, last_updated);

        CREATE TABLE property (
          page_id TEXT NOT NULL,
          name TEXT NOT NULL,
          value TEXT,
          stamp TEXT NOT NULL,
          PRIMARY KEY (page_id, name)
        ) WITHOUT ROWID;

        CREATE TABLE block (
          id TEXT PRIMARY KEY,
          page_id TEXT NOT NULL,
          type TEXT NOT NULL,
          text TEXT NOT NULL,
          text_stamp TEXT NOT NULL,
          attributes TEXT NOT NULL,
          attributes_stamp TEXT NOT NULL,
          position REAL NOT NULL,
          position_stamp TEXT NOT NULL,
          deleted INTEGER NOT NULL DEFAULT 0,
          deleted_stamp TEXT NOT NULL
        );
        CREATE INDEX block_page ON block (page_id, position);

        CREATE TABLE view (
          database_id TEXT PRIMARY KEY,
          filter TEXT,
          sort TEXT,
          stamp TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE client (
          id TEXT PRIMARY KEY,
          user_id TEXT NOT NULL,
          last_mutation_id INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE change_log (
          page_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          field TEXT NOT NULL,
          PRIMARY KEY (page_id, seq, field)
        ) WITHOUT ROWID;
        CREATE INDEX change_log_seq ON change_log (seq);
        """),
    // A rejected mutation's id is consumed like an applied one's; its reason is kept so that a re-send (the first
    // answer lost: a cut connection, a daemon killed before it read it) is answered `rejected` again, not
    // `duplicate`, which the client would take for applied and drop.
    SQLiteMigration(
      version: 2, name: "rejections, answered again to a re-sent batch",
      sql: """
        CREATE TABLE rejection (
          client_id TEXT NOT NULL,
          mutation_id INTEGER NOT NULL,
          code INTEGER NOT NULL,
          PRIMARY KEY (client_id, mutation_id)
        ) WITHOUT ROWID;
        """),
    // Block text became a CRDT (RichText): `crdt` holds the state (`TextDocument.encoded()`, with the sequence
    // each run and deletion reached the broker, so a delta carries only what a device lacks), `marks` the marks
    // it renders to (JSON, for readers), `text` stays the rendered text. Blocks stored before get their state at
    // open (`backfillTextStates`: their text as first text, the ids every device derives from it).
    SQLiteMigration(
      version: 3, name: "block text as a CRDT state with marks",
      sql: """
        ALTER TABLE block ADD COLUMN crdt BLOB;
        ALTER TABLE block ADD COLUMN marks TEXT NOT NULL DEFAULT '[]';
        """),
    // A page's stored size (`PageStore+Size.swift`), kept up to date by every batch that changes it, so that
    // `[limits] page_bytes` is checked without reading the page. NULL until counted: pages stored before get
    // theirs at open (`countPageSizes`). A rejection keeps the words that named its limit, for a re-send.
    SQLiteMigration(
      version: 4, name: "page sizes, rejection messages",
      sql: """
        ALTER TABLE page ADD COLUMN stored_bytes INTEGER;
        ALTER TABLE rejection ADD COLUMN message TEXT;
        """),
    // Each page's `height` (0 without children, else 1 + its children's greatest), so that a move knows how deep
    // the subtree it moves reaches without reading it (`[limits] tree_depth`; PageStore+Tree.swift). Existing
    // pages get -1 and their heights at open (`backfillHeights`), as does any page a broker of an earlier
    // version inserts. The index on (parent, height) answers "the greatest height among a page's children" and
    // every "children of" query the old index on the parent did.
    SQLiteMigration(
      version: 5, name: "page heights for the tree depth limit",
      sql: """
        ALTER TABLE page ADD COLUMN height INTEGER NOT NULL DEFAULT -1;
        DROP INDEX page_parent;
        CREATE INDEX page_parent_height ON page (parent_id, height);
        """),
    // What each client's recent mutations said (`Mutation.contentDigest`), by id: a mutation sent under an id the
    // client used for another one (two copies of one device's store: a backup restored, a cloned image) is
    // answered `id_reused` instead of `duplicate`, which the device would drop. At least the newest
    // `[limits] mutation_digests_per_client` ids of each client are kept, in chunks of 64 ids: the digests of
    // ids `chunk * 64` to `chunk * 64 + 63`, 8 bytes each, little-endian, 0 for none (`ClientDigests`). The chunk
    // of the client's last id is `client.recent_digests` (rewritten with the row at every batch), older ones rows
    // of `mutation_digest`.
    SQLiteMigration(
      version: 6, name: "digests of each client's recent mutations, to tell a re-send from a reused id",
      sql: """
        ALTER TABLE client ADD COLUMN recent_digests BLOB;
        CREATE TABLE mutation_digest (
          client_id TEXT NOT NULL,
          chunk INTEGER NOT NULL,
          digests BLOB NOT NULL,
          PRIMARY KEY (client_id, chunk)
        ) WITHOUT ROWID;
        """),
  ]

  /// The PostgreSQL schema: the same tables, columns and indexes as SQLite's migrations 1 to 6 together, in
  /// PostgreSQL's types (`bigint`, `double precision`, `bytea`). Ids, stamps and field names sort bytewise
  /// (`COLLATE "C"`), as SQLite's BINARY collation does, so that "ORDER BY ..., id" is the same order on both.
  /// Two things only PostgreSQL has, for several brokers on one store (docs/architecture.md, "Time across
  /// brokers"): batches take their sequence from `batch_sequence` (not `meta.sequence`, a row every writer would
  /// queue on), and each page keeps the id of the transaction that last changed it (`change_xid`), which the seed
  /// API's cursor compares. Later changes to the schema are a migration on each list.
  static let postgresMigrations: [StoreMigration] = [
    StoreMigration(
      version: 1, name: "the schema of SQLite's version 6",
      sql: """
        CREATE TABLE meta (
          key TEXT COLLATE "C" PRIMARY KEY,
          value TEXT NOT NULL
        );
        CREATE TABLE page (
          id TEXT COLLATE "C" PRIMARY KEY,
          workspace_id TEXT COLLATE "C" NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('page', 'database')),
          parent_id TEXT COLLATE "C",
          parent_stamp TEXT COLLATE "C" NOT NULL,
          title TEXT NOT NULL,
          title_stamp TEXT COLLATE "C" NOT NULL,
          deleted INTEGER NOT NULL DEFAULT 0,
          deleted_stamp TEXT COLLATE "C" NOT NULL,
          created_seq BIGINT NOT NULL,
          last_updated BIGINT NOT NULL,
          updated_at_ms BIGINT NOT NULL,
          stored_bytes BIGINT,
          height BIGINT NOT NULL DEFAULT -1,
          change_xid XID8 NOT NULL DEFAULT pg_current_xact_id()
        );
        CREATE INDEX page_workspace_updated ON page (workspace_id, last_updated);
        CREATE INDEX page_workspace_xid ON page (workspace_id, change_xid);
        CREATE SEQUENCE batch_sequence;
        CREATE INDEX page_parent_height ON page (parent_id, height);
        CREATE TABLE property (
          page_id TEXT COLLATE "C" NOT NULL,
          name TEXT COLLATE "C" NOT NULL,
          value TEXT,
          stamp TEXT COLLATE "C" NOT NULL,
          PRIMARY KEY (page_id, name)
        );
        CREATE TABLE block (
          id TEXT COLLATE "C" PRIMARY KEY,
          page_id TEXT COLLATE "C" NOT NULL,
          type TEXT NOT NULL,
          text TEXT NOT NULL,
          text_stamp TEXT COLLATE "C" NOT NULL,
          attributes TEXT NOT NULL,
          attributes_stamp TEXT COLLATE "C" NOT NULL,
          position DOUBLE PRECISION NOT NULL,
          position_stamp TEXT COLLATE "C" NOT NULL,
          deleted INTEGER NOT NULL DEFAULT 0,
          deleted_stamp TEXT COLLATE "C" NOT NULL,
          crdt BYTEA,
          marks TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX block_page ON block (page_id, position);
        CREATE TABLE view (
          database_id TEXT COLLATE "C" PRIMARY KEY,
          filter TEXT,
          sort TEXT,
          stamp TEXT COLLATE "C" NOT NULL
        );
        CREATE TABLE client (
          id TEXT COLLATE "C" PRIMARY KEY,
          user_id TEXT COLLATE "C" NOT NULL,
          last_mutation_id BIGINT NOT NULL,
          recent_digests BYTEA
        );
        CREATE TABLE change_log (
          page_id TEXT COLLATE "C" NOT NULL,
          seq BIGINT NOT NULL,
          field TEXT COLLATE "C" NOT NULL,
          PRIMARY KEY (page_id, seq, field)
        );
        CREATE INDEX change_log_seq ON change_log (seq);
        CREATE TABLE rejection (
          client_id TEXT COLLATE "C" NOT NULL,
          mutation_id BIGINT NOT NULL,
          code INTEGER NOT NULL,
          message TEXT,
          PRIMARY KEY (client_id, mutation_id)
        );
        CREATE TABLE mutation_digest (
          client_id TEXT COLLATE "C" NOT NULL,
          chunk BIGINT NOT NULL,
          digests BYTEA NOT NULL,
          PRIMARY KEY (client_id, chunk)
        );
        """)
  ]
}
