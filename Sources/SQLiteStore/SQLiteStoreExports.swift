@_exported import StoreInterface

/// SQLite's name for the store interface's value: the SQLite code predates the interface.
public typealias SQLiteValue = SQLValue
