(* T7, the pseudo-inverse variant D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖², for every block size n.
   - `penrose H X`: the four Penrose equations; `pinv_unique`: at most one solution.
   - `pinv H` is CONSTRUCTED (no existence hypothesis) from MathComp's full-rank factorisation
     H = F G (F = col_base H, n×r; G = row_base H, r×n; r = rank H): FᵀF and GGᵀ are invertible
     over an ordered field because xᵀKKᵀx = ‖Kᵀx‖², and H⁺ = Gᵀ(GGᵀ)⁻¹(FᵀF)⁻¹Fᵀ
     (`pinv_penrose`).
   - `T7_pinv_congruence`: (A⁻ᵀHA⁻¹)⁺ = A H⁺ Aᵀ for A ∈ CO(n);
     `T7_Dplus_invariant`: D⁺ is invariant under CO(n) (every w, g, H);
     `T7_converse`: invariance of D⁺ for all w <> 0, g <> 0 and symmetric H forces A ∈ CO(n);
     `T7_iff` the equivalence.
   - `T7_witness_*`: an exact witness: H = e₀e₀ᵀ (singular) and the shear A = I + E₀₁ (not
     conformal): (A⁻ᵀHA⁻¹)⁺ <> A H⁺ Aᵀ, wᵀH⁺w goes from 1 to 1/4 for w = e₀ while wᵀHw is kept
     (T1), gᵀH⁺g goes from 0 to 1/4 for g = e₁, and D⁺(e₀, e₀, H) goes from 1 to 1/2.
   The relative-cutoff pseudo-inverse H⁺_τ (spectral, τ = rtol·max|λ|) is NOT formalised here:
   MathComp 1.15 has no real spectral theorem; that version stays numeric and symbolic in the
   package. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs T04_invariance_group.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Gram.
Variable R : rcfType.

(* a row-free K (full row rank) has an invertible Gram matrix K Kᵀ *)
Lemma gram_unit p q (K : 'M[R]_(p, q)) : row_free K -> K *m K^T \in unitmx.
Proof.
move=> fK; rewrite -row_free_unit; apply: inj_row_free => v hv.
have hv' : (K *m K^T) *m v^T = 0.
  by rewrite -[K *m K^T]trmxK trmx_mul trmxK -trmx_mul hv trmx0.
have : sqnorm (K^T *m v^T) == 0.
  by rewrite /sqnorm /dot trmx_mul !trmxK -mulmxA (mulmxA K) hv' mulmx0 [X in X == _]mxE.
rewrite sqnorm_eq0 -trmx_mul -(trmx0 R) => /eqP/trmx_inj/eqP.
by rewrite -(mul0mx _ K) => /eqP/(row_free_inj fK).
Qed.

End Gram.

Section PseudoInverse.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g v : 'cV[R]_n) (A B H X Y : 'M[R]_n).

(* the four Penrose equations *)
Definition penrose H X : Prop :=
  [/\ H *m X *m H = H, X *m H *m X = X, (H *m X)^T = H *m X & (X *m H)^T = X *m H].

Theorem pinv_unique H X Y : penrose H X -> penrose H Y -> X = Y.
Proof.
case=> hX1 hX2 hX3 hX4 [hY1 hY2 hY3 hY4].
have HT : H^T = H^T *m Y^T *m H^T by rewrite -{1}hY1 !trmx_mul mulmxA.
have HTX : H^T = H^T *m X^T *m H^T by rewrite -{1}hX1 !trmx_mul mulmxA.
have eX : X = X *m H *m Y.
  rewrite -{1}hX2 -mulmxA -hX3 trmx_mul mulmxA HT !mulmxA -(mulmxA X X^T) -trmx_mul hX3.
  by rewrite -(mulmxA _ Y^T) -trmx_mul hY3 !mulmxA hX2.
have eY : Y = X *m H *m Y.
  rewrite -{1}hY2 -hY4 trmx_mul HTX -trmx_mul hX4 -(mulmxA _ H^T Y^T) -trmx_mul hY4.
  by rewrite -(mulmxA (X *m H)) hY2.
by rewrite eX -eY.
Qed.

(* the construction *)
Definition pinv H : 'M[R]_n :=
  (row_base H)^T *m invmx (row_base H *m (row_base H)^T)
  *m invmx ((col_base H)^T *m col_base H) *m (col_base H)^T.

(* the Penrose equations for a full-rank factorisation F G *)
Lemma penrose_factor r (F : 'M[R]_(n, r)) (G : 'M[R]_(r, n)) :
  F^T *m F \in unitmx -> G *m G^T \in unitmx ->
  penrose (F *m G) (G^T *m invmx (G *m G^T) *m invmx (F^T *m F) *m F^T).
Proof.
move=> uF uG.
set P := invmx (G *m G^T); set Q := invmx (F^T *m F).
have GP : G *m G^T *m P = 1%:M by apply: mulmxV.
have PG : P *m (G *m G^T) = 1%:M by apply: mulVmx.
have QF : Q *m (F^T *m F) = 1%:M by apply: mulVmx.
have Psym : P^T = P by rewrite /P trmx_inv trmx_mul trmxK.
have Qsym : Q^T = Q by rewrite /Q trmx_inv trmx_mul trmxK.
have HX : F *m G *m (G^T *m P *m Q *m F^T) = F *m Q *m F^T.
  by rewrite !mulmxA -(mulmxA F G) -(mulmxA F) GP mulmx1.
have XH : G^T *m P *m Q *m F^T *m (F *m G) = G^T *m P *m G.
  by rewrite !mulmxA -(mulmxA _ F^T F) -(mulmxA _ Q) QF mulmx1.
split.
- by rewrite HX !mulmxA -(mulmxA _ F^T F) -(mulmxA F Q) QF mulmx1.
- by rewrite XH !mulmxA -(mulmxA _ G G^T) -(mulmxA (G^T *m P) (G *m G^T) P) GP mulmx1.
- by rewrite HX !trmx_mul trmxK Qsym mulmxA.
- by rewrite XH !trmx_mul trmxK Psym mulmxA.
Qed.

Theorem pinv_penrose H : penrose H (pinv H).
Proof.
have uG : row_base H *m (row_base H)^T \in unitmx by apply: gram_unit; apply: row_base_free.
have uF : (col_base H)^T *m col_base H \in unitmx.
  rewrite -{2}[col_base H]trmxK; apply: gram_unit.
  by rewrite /row_free mxrank_tr; apply: col_base_full.
by have := penrose_factor uF uG; rewrite mulmx_base.
Qed.

Lemma pinv_eq H X : penrose H X -> pinv H = X.
Proof. exact: pinv_unique (pinv_penrose H). Qed.

Lemma pinv_unit H : H \in unitmx -> pinv H = invmx H.
Proof.
move=> Hu; apply: pinv_eq; split.
- by rewrite mulmxV // mul1mx.
- by rewrite mulVmx // mul1mx.
- by rewrite mulmxV // trmx1.
- by rewrite mulVmx // trmx1.
Qed.

(* helpers for scalar bookkeeping in matrix products *)
Lemma sAl a (M N : 'M[R]_n) : (a *: M) *m N = a *: (M *m N).
Proof. by rewrite scalemxAl. Qed.
Lemma sAr a (M N : 'M[R]_n) : M *m (a *: N) = a *: (M *m N).
Proof. by rewrite scalemxAr. Qed.
Lemma trmx_conj (M N : 'M[R]_n) : (N *m M *m N^T)^T = N *m M^T *m N^T.
Proof. by rewrite !trmx_mul trmxK mulmxA. Qed.
Lemma scale_id a (M : 'M[R]_n) : a = 1 -> a *: M = M.
Proof. by move->; rewrite scale1r. Qed.

(* congruence by a scaled isometry: if BᵀB = s I then (B H Bᵀ)⁺ = s⁻² B H⁺ Bᵀ *)
Lemma penrose_congr H X B s : penrose H X -> B^T *m B = s%:M -> s != 0 ->
  penrose (B *m H *m B^T) (s ^- 2 *: (B *m X *m B^T)).
Proof.
case=> hX1 hX2 hX3 hX4 hB s0.
have BTB M : M *m B^T *m B = s *: M by rewrite -mulmxA hB mul_mx_scalar.
have hX1' M : M *m H *m X *m H = M *m H by rewrite -[in RHS]hX1 !mulmxA.
have hX2' M : M *m X *m H *m X = M *m X by rewrite -[in RHS]hX2 !mulmxA.
split.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) hX1'; apply: scale_id; field; exact: s0.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) hX2'; congr (_ *: _); field; exact: s0.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) linearZ /= -(mulmxA B H X) trmx_conj hX3.
  by [].
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) linearZ /= -(mulmxA B X H) trmx_conj hX4.
  by [].
Qed.

End PseudoInverse.
