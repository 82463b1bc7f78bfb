"""Operations run by schedulers and operators: offset snapshots, and more to come."""
