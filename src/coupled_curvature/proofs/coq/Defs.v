(* The package's quantities, one for one with numeric/ and symbolic/, defined once here:
   for a block with value w, gradient g and Hessian block H (column vectors of size n),
     RQ  = wᵀHw / wᵀw,    D = RQ / ‖g‖²,    D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖²,
   with H⁺ the Moore–Penrose pseudo-inverse (`pinv`, built from MathComp's full-rank
   factorisation; T07_pseudo_inverse.v proves that it satisfies the Penrose equations and is
   the only matrix that does), the standard basis vector e_i,
   the block action of an invertible A (T1):  w -> A w,  g -> A⁻ᵀ g,  H -> A⁻ᵀ H A⁻¹,
   and the conformal group CO(n) = { A : AᵀA = c² I, c > 0 }.
   The derivative notions (d1, d2, grad, hess) need mathcomp-analysis and are in DefsAnalytic.v,
   so that the algebraic files do not depend on it; differentiable_near is in T01_analytic.v.

   Every file of the development imports this one, which also sets the shared context: implicit
   arguments, GRing.Theory and Num.Theory, and ring_scope (exported, so the files do not repeat
   them). *)
From mathcomp Require Import all_ssreflect all_algebra.

#[export] Set Implicit Arguments.
#[export] Unset Strict Implicit.
#[export] Unset Printing Implicit Defensive.

Export GRing.Theory Num.Theory.
Open Scope ring_scope.

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

(* the Moore–Penrose pseudo-inverse H⁺ = Gᵀ(GGᵀ)⁻¹(FᵀF)⁻¹Fᵀ of H = F G
   (F = col_base H, n×r; G = row_base H, r×n; r = rank H) *)
Definition pinv (H : 'M[R]_n) : 'M[R]_n :=
  (row_base H)^T *m invmx (row_base H *m (row_base H)^T)
  *m invmx ((col_base H)^T *m col_base H) *m (col_base H)^T.
(* D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖², mirroring the package's definition *)
Definition coupledDplus (w g : 'cV[R]_n) (H : 'M[R]_n) : R := quad (pinv H) w / sqnorm w * sqnorm g.

(* the standard basis vector e_i *)
Definition e (i : 'I_n) : 'cV[R]_n := delta_mx i 0.

(* the block action of A (T1) *)
Definition act_w (A : 'M[R]_n) (w : 'cV[R]_n) : 'cV[R]_n := A *m w.
Definition act_g (A : 'M[R]_n) (g : 'cV[R]_n) : 'cV[R]_n := (invmx A)^T *m g.
Definition act_H (A : 'M[R]_n) (H : 'M[R]_n) : 'M[R]_n := (invmx A)^T *m H *m invmx A.

(* CO(n) *)
Definition conformal (A : 'M[R]_n) : Prop :=
  exists c : R, 0 < c /\ A^T *m A = (c ^+ 2)%:M.

End Defs.

Arguments e {R n} i.

(* "f (D or D⁺) is invariant under A for every w ≠ 0, g ≠ 0 and symmetric H", the hypothesis of
   T4 and T7; only parsing, so that the statements print it in full.  f is given with its
   implicit arguments as holes, e.g. invariant_under (@coupledD _ _) A. *)
Notation invariant_under f A :=
  (forall (w g : 'cV[_]_ _) (H : 'M[_]_ _), w != 0 -> g != 0 -> H^T = H ->
     f (act_w A w) (act_g A g) (act_H A H) = f w g H)
  (only parsing).
