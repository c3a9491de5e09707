"""Evolution: the generation loop (:mod:`.loop`), selection and variation
(:mod:`.select`), and the rollouts of one individual (:mod:`.evaluate`)."""
