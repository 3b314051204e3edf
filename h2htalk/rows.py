"""Model instances from rows of hand-written SQL, for the few hot statements written out (the
rating queue's candidate lock, the API token lookup) because building and compiling them with
the ORM cost more server CPU than running them."""

from django.db import connection


def columns(alias: str, names) -> str:
    """`alias.name, …` for a SELECT list."""
    return ", ".join(f"{alias}.{name}" for name in names)


def instance(model, names, values):
    """A `model` instance from these columns (attnames, in any order), each converted as the
    ORM converts it (JSON, booleans on SQLite, …); the fields not read are deferred."""
    converted = {}
    for name, value in zip(names, values, strict=True):
        col = model._meta.get_field(name.removesuffix("_id")).get_col(model._meta.db_table)
        for convert in connection.ops.get_db_converters(col) + col.get_db_converters(connection):
            value = convert(value, col, connection)
        converted[name] = value
    ordered = [f.attname for f in model._meta.concrete_fields if f.attname in converted]
    return model.from_db(connection.alias, ordered, [converted[name] for name in ordered])
