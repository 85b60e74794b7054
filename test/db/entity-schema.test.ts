import { describe, expect, it } from "vitest";
import { ReferenceKind } from "@mikro-orm/core";
import { dbKind, useTestOrm } from "../support/db.js";
import { entities } from "../../src/entities.js";

/** One column as "table.column: type null|not null [generated] [serial]", the form both sides are compared in. */
function column(table: string, name: string, type: string, c: { nullable: boolean; generated: boolean; serial: boolean }): string {
  return `${table}.${name}: ${type} ${c.nullable ? "null" : "not null"}${c.generated ? " generated" : ""}${c.serial ? " serial" : ""}`;
}

/** PostgreSQL's own name for a type (information_schema's udt_name) in the entities' spelling. */
const DB_TYPES: Record<string, string> = {
  int2: "smallint",
  int4: "integer",
  int8: "bigint",
  bool: "boolean",
  _text: "text[]",
  _int8: "bigint[]",
  float8: "double precision",
};
/** The entities' aliases of the same types. */
const ENTITY_TYPES: Record<string, string> = {
  bigserial: "bigint",
  serial: "integer",
  int: "integer",
  int4: "integer",
  int2: "smallint",
  int8: "bigint",
  bool: "boolean",
  "timestamp with time zone": "timestamptz",
};

function entityType(columnType: string): string {
  // timestamptz(6) is PostgreSQL's default precision, the same column as plain timestamptz.
  const t = columnType.toLowerCase().replace(/^timestamptz\(6\)$/, "timestamptz");
  return ENTITY_TYPES[t] ?? t;
}

describe(`entities and the migrated schema (${dbKind()})`, () => {
  const db = useTestOrm();

  it("have the same tables and columns, with the same types and nullability", async () => {
    // What the migrations made: every column of every table but the migrators' own (versioned and repeatable).
    const rows = await db.orm.em.fork().execute<
      {
        table_name: string;
        column_name: string;
        udt_name: string;
        character_maximum_length: number | null;
        is_nullable: string;
        is_generated: string;
        column_default: string | null;
      }[]
    >(
      `select table_name, column_name, udt_name, character_maximum_length, is_nullable, is_generated, column_default
         from information_schema.columns
        where table_schema = 'public' and table_name not in ('mikro_orm_migrations', 'repeatable_sql')
          and table_name in (select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE')`,
    );
    const inDatabase = rows.map((r) => {
      const base = DB_TYPES[r.udt_name] ?? r.udt_name;
      const type = r.character_maximum_length === null ? base : `${base}(${r.character_maximum_length})`;
      return column(r.table_name, r.column_name, type, {
        nullable: r.is_nullable === "YES",
        generated: r.is_generated === "ALWAYS",
        // bigserial: a bigint whose default takes the next value of its own sequence.
        serial: r.column_default?.startsWith("nextval(") ?? false,
      });
    });

    // What the entities say: every persisted scalar property of every entity.
    const inEntities = [...db.orm.getMetadata().getAll().values()]
      .filter((meta) => !meta.embeddable && !meta.abstract)
      .flatMap((meta) =>
        meta.props
          .filter((prop) => prop.kind === ReferenceKind.SCALAR && prop.persist !== false)
          .map((prop) =>
            column(meta.tableName, prop.fieldNames[0], entityType(prop.columnTypes[0]), {
              nullable: prop.nullable === true,
              generated: prop.generated !== undefined,
              serial: prop.autoincrement === true,
            }),
          ),
      );

    expect(inEntities.sort()).toEqual(inDatabase.sort());
  });

  it("lists every entity in src/entities.ts, the one place the ORM takes them from", () => {
    const tables = [...db.orm.getMetadata().getAll().values()].filter((meta) => !meta.embeddable && !meta.abstract).map((meta) => meta.className);
    expect(tables.sort()).toEqual(entities.map((e) => e.name).sort());
  });
});
