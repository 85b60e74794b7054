// The few parts of `pg` (installed with @mikro-orm/postgresql, which ships no types for it) the bench uses.
declare module "pg" {
  interface QueryResult {
    rows: Record<string, any>[];
    rowCount: number | null;
  }
  interface Queryable {
    query(sql: string, params?: unknown[]): Promise<QueryResult>;
  }
  class Client implements Queryable {
    constructor(config: { connectionString: string });
    connect(): Promise<void>;
    query(sql: string, params?: unknown[]): Promise<QueryResult>;
    /** A named statement is prepared once per connection. */
    query(config: { name?: string; text: string; values?: unknown[] }): Promise<QueryResult>;
    end(): Promise<void>;
    on(event: "error", listener: (e: Error) => void): this;
  }
  class Pool implements Queryable {
    constructor(config: { connectionString?: string; max?: number });
    query(sql: string, params?: unknown[]): Promise<QueryResult>;
    end(): Promise<void>;
  }
  const pg: { Client: typeof Client; Pool: typeof Pool };
  export default pg;
  export { Client, Pool };
}
