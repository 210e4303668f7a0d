"""Documents -> canonical text -> locatable chunks with stable IDs. Plain Python; imports no Dagster."""
