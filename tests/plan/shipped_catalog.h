// The catalogs Nimbus ships (data/catalog), read once for all of a test program's tests.
#pragma once

#include "nimbus/plan/catalog.h"

namespace nimbus::plan {

inline const Catalog& shipped() {
  static const Catalog catalog = load_catalog(default_catalog_files());
  return catalog;
}

}  // namespace nimbus::plan
