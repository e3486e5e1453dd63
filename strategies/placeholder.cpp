// strategies/ is filled by the planner; this keeps the library target non-empty.
namespace loom::strategies {}
