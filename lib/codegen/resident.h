/* resident.h: a lane's view of one tile of a resident run (emit_resident.c), for the emitters
 * that work on it (emit_across.c). Internal to lib/codegen: include after codegen.h with
 * ASTITCH_EMIT_INTERNAL defined. */
#ifndef ASTITCH_RESIDENT_H
#define ASTITCH_RESIDENT_H

typedef struct Resident {
    const astitch_mapping *m;
    Shape space, kept;
    int vector, slots, n;      /* elements per access, accesses per lane, n = vector * slots */
    LLVMValueRef lane, row_in_tile;
    LLVMValueRef row, valid;   /* this lane's row in the tensor and whether it is one */
    LLVMValueRef *slot_ok;     /* per slot: inside the row (NULL: every slot always is) */
    Index *ix;                 /* per element of the lane: its index in the space */
    LLVMValueRef *col;         /* per element of the lane: its place in the row */
    LLVMValueRef *cache;       /* per element: nnode cached values */
    Index rowix;               /* the row, in the kept axes' shape */
    LLVMValueRef *rowcache;    /* nnode cached values at the row */
    LLVMValueRef *rowval;      /* nnode values of the run's row roots (Emit.rowval) */
    int at;                    /* the element ev_value caches for (resident_at_element) */
    signed char *slot_kind;    /* per node: whether a slot computes it as a run (emit_slot.c) */
    int32_t slot_phase;        /* the phase slot_kind is for (-1: none yet) */
    bool in_slot;              /* a slot's run is being emitted */
} Resident;

/* Makes element k of the lane the one ev_value caches for. */
void resident_at_element(Emit *e, Resident *r, int k);
/* emit_slot.c: node n at the element ev_value caches for, computed for the element's whole slot
 * by the vector walk into the slot's caches, where node n has a concatenate in its cone and
 * nothing the walk cannot compute without the run; NULL to compute it element by element. */
LLVMValueRef resident_slot_value(Emit *e, int32_t n);
/* A condition that holds where the lane's row is valid and slot s is inside it. */
LLVMValueRef resident_slot_valid(Emit *e, const Resident *r, int s);

/* emit_across.c: reduces summed across the run's rows (plan_reduce_across) */
/* Adds root n's elements on the lane's tile into the block's column sums (vals: r->n
 * registers of scratch). */
void emit_across_tile(Emit *e, Resident *r, int32_t n, LLVMValueRef *vals);
/* For every across root of phases [first, end): before the block's tiles (init) its column
 * sums set to the identity; after them, folded and added into the destination. True when the
 * run has such roots; the caller places the block barriers around both. */
bool emit_across_fold(Emit *e, int32_t first, int32_t end, bool init);

#endif
