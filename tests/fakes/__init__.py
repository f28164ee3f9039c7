"""Local fakes of the crowd providers' wire protocols, for tests (never imported by hitkit/)."""
