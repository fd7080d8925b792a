"""Wire protocol: schema files, typed message values and the codec that maps one onto the other."""
