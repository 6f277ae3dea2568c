(* The package's quantities, one for one with numeric/ and symbolic/:
   for a block with value w, gradient g and Hessian block H (column vectors of size n),
     RQ  = wᵀHw / wᵀw,    D = RQ / ‖g‖²,
   the block action of an invertible A (T1):  w -> A w,  g -> A⁻ᵀ g,  H -> A⁻ᵀ H A⁻¹,
   and the conformal group CO(n) = { A : AᵀA = c² I, c > 0 }.
   D⁺ needs the pseudo-inverse, which is constructed in T07_pseudo_inverse.v. *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Defs.
Variable R : rcfType.
Variable n : nat.

(* uᵀv as a scalar *)
Definition dot (u v : 'cV[R]_n) : R := (u^T *m v) 0 0.
(* ‖u‖² *)
Definition sqnorm (u : 'cV[R]_n) : R := dot u u.
(* wᵀHw *)
Definition quad (H : 'M[R]_n) (w : 'cV[R]_n) : R := dot w (H *m w).
(* RQ = wᵀHw / wᵀw *)
Definition RQ (H : 'M[R]_n) (w : 'cV[R]_n) : R := quad H w / sqnorm w.
(* D = RQ / ‖g‖² *)
Definition coupledD (w g : 'cV[R]_n) (H : 'M[R]_n) : R := RQ H w / sqnorm g.

(* the block action of A (T1) *)
Definition act_w (A : 'M[R]_n) (w : 'cV[R]_n) : 'cV[R]_n := A *m w.
Definition act_g (A : 'M[R]_n) (g : 'cV[R]_n) : 'cV[R]_n := (invmx A)^T *m g.
Definition act_H (A : 'M[R]_n) (H : 'M[R]_n) : 'M[R]_n := (invmx A)^T *m H *m invmx A.

(* CO(n) *)
Definition conformal (A : 'M[R]_n) : Prop :=
  exists c : R, 0 < c /\ A^T *m A = (c ^+ 2)%:M.

End Defs.
